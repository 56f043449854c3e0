"""What each test file costs: `pytest --file-costs=PATH` writes a table.

Per test file (summed over its tests' setup, call and teardown, module
fixtures included): wall time, CPU time of the pytest process and of every
process below it (the session's TFF worker, subprocesses and the workers they
start), the Python subprocesses and TFF `worker_binary` processes that appeared
below the pytest process, and the TFF computations this process traced. Each
xdist process writes `PATH.<worker id>.jsonl`; the controller merges them into
`PATH` (tab-separated, costliest first). `docs/development.md` says how to
read it. Off unless the option is given: it costs nothing otherwise.
"""

import glob
import json
import os
import resource
import threading
import time

import pytest

_SAMPLE_SECONDS = 0.2


def pytest_addoption(parser):
  parser.addoption(
      '--file-costs',
      default=None,
      metavar='PATH',
      help='Write the cost of every test file (wall, CPU, subprocesses, TFF'
      ' workers, computations) to PATH.',
  )


def _proc_tree(root):
  """{pid: (cpu seconds, cmdline)} for the live descendants of `root`."""
  parents, info = {}, {}
  tick = os.sysconf('SC_CLK_TCK')
  for name in os.listdir('/proc'):
    if not name.isdigit():
      continue
    try:
      with open(f'/proc/{name}/stat', 'rb') as f:
        stat = f.read().decode(errors='replace')
      with open(f'/proc/{name}/cmdline', 'rb') as f:
        cmdline = f.read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
      continue
    fields = stat[stat.rindex(')') + 2 :].split()
    parents[int(name)] = int(fields[1])
    info[int(name)] = ((int(fields[11]) + int(fields[12])) / tick, cmdline)
  below, frontier = {}, [root]
  while frontier:
    parent = frontier.pop()
    for pid, ppid in parents.items():
      if ppid == parent and pid not in below:
        below[pid] = info[pid]
        frontier.append(pid)
  return below


def _own_cpu():
  own = resource.getrusage(resource.RUSAGE_SELF)
  reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


class _Costs:
  """Accumulates the costs of the test file that runs now."""

  def __init__(self, path):
    self._path = path
    self._lock = threading.Lock()
    self._file = None
    self._rows = {}
    self._seen = set()
    self._computations = 0
    self._stop = threading.Event()
    self._count_computations()
    threading.Thread(target=self._sample, daemon=True).start()

  def _count_computations(self):
    """Counts every concrete TFF computation traced in this process."""
    from tensorflow_federated.python.core.impl.computation import computation_wrapper  # pylint: disable=g-import-not-at-top

    original = computation_wrapper._wrap_concrete  # pylint: disable=protected-access

    def counted(*args, **kwargs):
      self._computations += 1
      return original(*args, **kwargs)

    computation_wrapper._wrap_concrete = counted  # pylint: disable=protected-access

  def _row(self, file):
    return self._rows.setdefault(
        file,
        {
            'file': file,
            'tests': 0,
            'wall_s': 0.0,
            'cpu_s': 0.0,
            'python_subprocesses': 0,
            'tff_workers': 0,
            'computations': 0,
        },
    )

  def _sample(self):
    while not self._stop.wait(_SAMPLE_SECONDS):
      self._note_processes()

  def _note_processes(self):
    tree = _proc_tree(os.getpid())
    with self._lock:
      if self._file is None:
        return
      row = self._row(self._file)
      for pid, (_, cmdline) in tree.items():
        key = (pid, cmdline)
        if key in self._seen:
          continue
        self._seen.add(key)
        if 'worker_binary' in cmdline:
          row['tff_workers'] += 1
        elif 'python' in cmdline.split(' ')[0]:
          row['python_subprocesses'] += 1
    return tree

  def start(self, file):
    with self._lock:
      self._file = file
    tree = self._note_processes()
    self._start = (
        time.monotonic(),
        _own_cpu() + sum(cpu for cpu, _ in tree.values()),
        self._computations,
    )

  def finish(self):
    tree = self._note_processes()
    wall, cpu, computations = self._start
    with self._lock:
      row = self._row(self._file)
      row['tests'] += 1
      row['wall_s'] += time.monotonic() - wall
      row['cpu_s'] += _own_cpu() + sum(c for c, _ in tree.values()) - cpu
      row['computations'] += self._computations - computations
      self._file = None

  def write(self, worker):
    self._stop.set()
    with open(f'{self._path}.{worker}.jsonl', 'w') as f:
      for row in self._rows.values():
        f.write(json.dumps(row) + '\n')


def merge(path):
  """Merges the per-process files of `path` into one table, costliest first."""
  rows = {}
  for part in glob.glob(f'{glob.escape(path)}.*.jsonl'):
    with open(part) as f:
      for line in f:
        row = json.loads(line)
        total = rows.setdefault(
            row['file'],
            dict(
                row,
                tests=0,
                wall_s=0.0,
                cpu_s=0.0,
                python_subprocesses=0,
                tff_workers=0,
                computations=0,
            ),
        )
        for key, value in row.items():
          if key != 'file':
            total[key] += value
    os.remove(part)
  columns = [
      'file',
      'tests',
      'wall_s',
      'cpu_s',
      'python_subprocesses',
      'tff_workers',
      'computations',
  ]
  with open(path, 'w') as f:
    f.write('\t'.join(columns) + '\n')
    for row in sorted(rows.values(), key=lambda r: -r['wall_s']):
      f.write(
          '\t'.join(
              f'{row[c]:.1f}' if isinstance(row[c], float) else str(row[c])
              for c in columns
          )
          + '\n'
      )


_COSTS_KEY = pytest.StashKey()


def pytest_configure(config):
  """Counts in the processes that run tests: xdist's workers, or a serial run."""
  path = config.getoption('--file-costs')
  runs_tests = hasattr(config, 'workerinput') or not config.getoption(
      'numprocesses', None
  )
  if path and runs_tests:
    config.stash[_COSTS_KEY] = _Costs(os.path.abspath(path))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  costs = item.config.stash.get(_COSTS_KEY, None)
  if costs is None:
    yield
    return
  costs.start(item.nodeid.split('::')[0])
  yield
  costs.finish()


def pytest_unconfigure(config):
  costs = config.stash.get(_COSTS_KEY, None)
  path = config.getoption('--file-costs')
  if costs is not None:
    costs.write(getattr(config, 'workerinput', {}).get('workerid', 'main'))
  if path and not hasattr(config, 'workerinput'):
    merge(os.path.abspath(path))
