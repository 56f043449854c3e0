"""TFF workers on other hosts: scripts/run_experiment.py with --workers=h:p,...

Two network namespaces are the hosts (tests/runtime/netns.py), each with a
worker bound inside it at 10.213.<k>.2:8000; the driver runs in the root
namespace. Each run is tiny (the 60-example npz task, 4 clients, all 4
sampled every round: 2 on each worker). Checked against runs on two local
workers (`--workers=2`), made once, when a test first compares with one.
The runs whose exit status and one line are the user's are the script in its
own process (the killed run, the blind worker's); the others, checked only by
their files, numbers and progress lines, run the script's flags in this
process (`script_runs.run_in_process`, the script's `run_experiment`, which
starts the two local workers or reaches the hosts' as the script does):

- FedAvg with the WSM loss and a window of W = 2, on the two hosts: a worker
  SIGKILLed mid-run ends it with one line naming the worker's address; the
  rerun after its restart resumes and the metrics equal the local run's. Its
  `auto` transfers resolve to values across hosts (no server_state_files/).
- SCAFFOLD (W = 2) with --shared_dir on the two hosts: the check passes, its
  `auto` transfers resolve to files in the shared directory, the metrics
  equal the local run's.
- --shared_dir with a worker that cannot see it: one line, before training.

The metrics are compared exactly, as the strings metrics.csv holds, every column
but the times: both runs split the 4 clients into the same two contiguous slices
of 2, one per worker, and TFF's mergeable context merges the two partial sums in
the same order, so every sum adds the same floats in the same order; values and
files carry the same bits (docs/design.md sec. 3.3; docs/performance.md, 'The
client loop and the worker'). With one local worker instead, the 4-client sums
would be added in another order and differ in the last bits (float32: relative
~1e-7 per addition).
"""

import json
import os
import re

import numpy as np
import pytest

from tests import script_runs
from tests.runtime import netns

_PORT = 8000
_ROUNDS = 8
_EVERY = 2  # Rounds per checkpoint.
_FEDAVG = dict(algorithm='fedavg', client_loss='wsm', window_size=2)
_SCAFFOLD = dict(algorithm='scaffold', window_size=2)

hosts = netns.hosts_fixture(2)


def _flags(data_npz, root, name, **overrides):
  values = dict(
      task='npz',
      data_npz=data_npz,
      num_clients=4,
      clients_per_round=4,
      total_rounds=_ROUNDS,
      rounds_per_eval=2,
      rounds_per_checkpoint=_EVERY,
      client_batch_size=10,
      root_output_dir=root,
      experiment_name=name,
  )
  values.update(overrides)
  return values


def _command(data_npz, root, name, **overrides):
  return script_runs.command(**_flags(data_npz, root, name, **overrides))


def _run_in_process(data_npz, root, name, **overrides):
  """The run of `_command` in this process; its summary."""
  return script_runs.run_in_process(
      script_runs.flag_args(**_flags(data_npz, root, name, **overrides))
  )


_start = script_runs.start
_run = script_runs.run
_rows = script_runs.rows


@pytest.fixture(scope='module')
def data_npz(tmp_path_factory):
  """60 train / 20 test random 8x8 images, 10 classes."""
  rng = np.random.default_rng(3)
  path = str(tmp_path_factory.mktemp('data') / 'tiny.npz')
  np.savez(
      path,
      x_train=rng.random((60, 8, 8), dtype=np.float32),
      y_train=np.arange(60) % 10,
      x_test=rng.random((20, 8, 8), dtype=np.float32),
      y_test=np.arange(20) % 10,
  )
  return path


class _Local:
  """A run on two local workers, in this process when first asked for."""

  def __init__(self, data_npz, root, name, flags):
    self.run_dir = os.path.join(root, name)
    self._run = lambda: _run_in_process(
        data_npz, root, name, workers=2, **flags
    )
    self._rows = None

  def rows(self):
    if self._rows is None:
      self._run()
      self._rows = _rows(self.run_dir)
      assert [r['round_num'] for r in self._rows] == [
          str(t) for t in range(1, _ROUNDS + 1)
      ]
    return self._rows


@pytest.fixture(scope='module')
def local(data_npz, tmp_path_factory):
  """The reference runs (FedAvg+WSM+window, SCAFFOLD)."""
  root = str(tmp_path_factory.mktemp('local'))
  return {
      name: _Local(data_npz, root, name, flags)
      for name, flags in (('fedavg', _FEDAVG), ('scaffold', _SCAFFOLD))
  }


@pytest.fixture(scope='module')
def workers(hosts, tmp_path_factory):
  """`--workers` of a worker on each host (restarted by a test if killed)."""
  logs = tmp_path_factory.mktemp('worker_logs')
  for i, host in enumerate(hosts):
    host.start_worker(_PORT, str(logs / f'host{i}.log'))
  return ','.join(f'{host.address}:{_PORT}' for host in hosts)


def _rounds_trained(stdout):
  return [int(m[1]) for m in re.finditer(r'^\w+: round (\d+)/', stdout, re.M)]


def _read_until_round(process, round_num):
  """Progress lines until the one of `round_num` (which must come)."""
  lines = []
  while not re.match(rf'\w+: round {round_num}/', lines[-1] if lines else ''):
    line = process.stdout.readline()
    assert line, process.communicate()[1][-3000:]
    lines.append(line)
  return lines


def test_killed_worker_on_another_host_then_the_rerun_equals_local(
    data_npz, tmp_path, hosts, workers, local, capsys
):
  command = _command(data_npz, str(tmp_path), 'run', workers=workers, **_FEDAVG)
  run_dir = str(tmp_path / 'run')
  lost = f'{hosts[1].address}:{_PORT}'
  run = _start(command)
  try:
    # Round 2 is an eval round (its line is printed) and checkpointed.
    _read_until_round(run, 2)
    hosts[1].kill_workers()
    stdout, stderr = run.communicate(timeout=300)
  finally:
    if run.poll() is None:
      run.kill()
      run.communicate(timeout=60)
  kept = [
      int(m[1])
      for m in map(
          re.compile(r'program_state_(\d+)').fullmatch,
          os.listdir(os.path.join(run_dir, 'checkpoints')),
      )
      if m
  ]
  resume = max(kept)
  assert 2 <= resume < _ROUNDS, stdout  # Killed mid-run.
  assert run.returncode == 1
  lines = stderr.splitlines()
  assert len(lines) == 1, stderr[-3000:]
  assert lines[0].startswith(f'run_experiment.py: TFF worker {lost} ')
  assert lines[0].endswith(
      f'The run stopped; a rerun resumes from the checkpoint of round '
      f'{resume} in {run_dir}/checkpoints: restart the worker at {lost} '
      '(or list another in --workers) and rerun the same command.'
  )

  hosts[1].start_worker(_PORT, str(tmp_path / 'restarted.log'))
  # The rerun in this process (its outputs are what it shows), on the
  # restarted worker as the user's rerun would be; the script's own first
  # line before a resume is run_directory_test's
  # (test_longer_total_rounds_resumes).
  capsys.readouterr()
  _run_in_process(data_npz, str(tmp_path), 'run', workers=workers, **_FEDAVG)
  rerun = capsys.readouterr().out
  assert rerun.startswith(
      f'run: resuming from the checkpoint of round {resume} '
  ), rerun
  # Lines for the first round and each eval round (and, on a slow machine,
  # others): from the round after the checkpoint to the last.
  trained = _rounds_trained(rerun)
  assert trained[0] == resume + 1 and trained[-1] == _ROUNDS, trained
  assert set(range(resume + 2, _ROUNDS + 1, 2)) <= set(trained)
  assert _rows(run_dir) == local['fedavg'].rows()
  # `auto` transfers: values across hosts (no server state files), files
  # with the local workers (the reference keeps them in its run directory).
  assert not os.path.exists(os.path.join(run_dir, 'server_state_files'))
  assert os.path.isdir(
      os.path.join(local['fedavg'].run_dir, 'server_state_files')
  )


def _transfer_root(shared, run_dir, name):
  """Where the run's files go in --shared_dir: <name>-<run id> (as
  registry.transfer_dirs documents it), the id read from run_config.json."""
  with open(os.path.join(run_dir, 'run_config.json')) as f:
    run_id = json.load(f)['run_id']
  return os.path.join(shared, f'{name}-{run_id}')


def test_scaffold_with_shared_dir_on_other_hosts_equals_local(
    data_npz, tmp_path, workers, local
):
  shared = str(tmp_path / 'shared')
  # In this process: the check and the transfers are run_experiment's; a
  # failed check raises here (the script's exit code and one line are the
  # blind worker's case below).
  _run_in_process(
      data_npz,
      str(tmp_path),
      'run',
      workers=workers,
      shared_dir=shared,
      **_SCAFFOLD,
  )
  run_dir = str(tmp_path / 'run')
  assert _rows(run_dir) == local['scaffold'].rows()
  # auto with --shared_dir: files, in the shared directory, not the run's.
  transfer_root = _transfer_root(shared, run_dir, 'run')
  assert sorted(os.listdir(shared)) == [os.path.basename(transfer_root)]
  for name in ('client_state_files', 'server_state_files'):
    assert os.listdir(os.path.join(transfer_root, name)), name
    assert not os.path.exists(os.path.join(run_dir, name))
  # The clients' data bundle is removed at the end, as in the run directory.
  assert not os.path.exists(os.path.join(transfer_root, 'client_data'))


def test_shared_dir_a_worker_does_not_see_is_one_line(
    data_npz, tmp_path, hosts, workers
):
  shared = str(tmp_path / 'shared')
  os.makedirs(shared)
  blind = hosts[1].start_worker(
      _PORT + 1, str(tmp_path / 'blind.log'), hidden_dir=shared
  )
  address = f'{hosts[1].address}:{_PORT + 1}'
  seeing = workers.split(',')[0]
  try:
    result = _run(
        _command(
            data_npz,
            str(tmp_path),
            'run',
            workers=f'{seeing},{address}',
            shared_dir=shared,
            **_FEDAVG,
        )
    )
  finally:
    netns.kill(blind)
    hosts[1].workers.remove(blind)
  assert result.returncode == 1
  lines = result.stderr.splitlines()
  assert len(lines) == 1, result.stderr[-3000:]
  assert re.fullmatch(
      rf'run_experiment.py: TFF worker {re.escape(address)} does not see the '
      rf'shared directory {shared} \(reading {shared}/\.tff_fedwin_shared_dir_'
      r'check-\w+ failed: .*\)\. Mount the same directory at \S+ on every '
      r'worker host, or set --server_state_transfer and '
      r'--client_data_transfer to values\.',
      lines[0],
  ), lines[0]
  # The check file is removed; what is left is the run's own transfer
  # directory (<experiment_name>-<run_id>, docs/runtime.md sec. 7) with only
  # the lock it held: no transfer file was written.
  (own,) = os.listdir(shared)
  assert re.fullmatch(r'run-[0-9a-f]{32}', own), own
  assert os.listdir(os.path.join(shared, own)) == ['.lock']
  # Before any training: no round was run or written.
  assert not os.path.exists(tmp_path / 'run' / 'metrics.csv')
  assert 'round 1/' not in result.stdout
