"""A run directory holds one run: scripts/run_experiment.py as a user runs it.

Each run is its own process: the same command launched twice (the second is
refused at once, the first ends as a lone run), a resume with other flags
(refused, nothing changed) or a longer --total_rounds (resumes), and a worker
killed by SIGKILL mid-run (one line naming it and the round a rerun resumes
from; a new worker on its port and the same command finish the run as an
uninterrupted one). Metrics are compared with the lone run's, every column
but the times, as the strings metrics.csv holds. The lone run, the 2-round
run the resumes start from and the rerun on the restarted worker are checked
only by their files and progress lines: they run in this process
(`script_runs.run_in_process`, the script's `run_experiment`; the lone run on
the session's TFF worker).

A run is short: the overlaps the cases need are made by a condition, not by
length. The lock holder is stopped (SIGSTOP) until the second launch is
refused; the run whose worker is killed is stopped while it dies.
"""

import json
import os
import re
import shutil
import signal
import time

import pytest

from tests import script_runs
from tests.experiments import session_worker
from tff_fedwin import runtime
from tff_fedwin.training import run_lock

# Rounds of a run (0.1-0.3 s each here), checkpointed every 4; the worker is
# killed after round 7 (a checkpoint behind, rounds before the end). The
# overlaps come from SIGSTOP, not from length: more rounds test nothing more.
_ROUNDS = 12
_EVERY = 4
_KILL_AFTER = 7


def _flags(data_npz, root, name='run', **overrides):
  """The script's flags (`--name=value`) as a dict."""
  values = dict(
      task='npz',
      data_npz=data_npz,
      num_clients=4,
      clients_per_round=2,
      total_rounds=_ROUNDS,
      rounds_per_eval=1,
      rounds_per_checkpoint=_EVERY,
      client_batch_size=10,
      root_output_dir=root,
      experiment_name=name,
  )
  values.update(overrides)
  return values


def _command(data_npz, root, name='run', **overrides):
  return script_runs.command(**_flags(data_npz, root, name, **overrides))


def _run_in_process(data_npz, root, **overrides):
  """The run of `_command` in this process; its summary."""
  return script_runs.run_in_process(
      script_runs.flag_args(**_flags(data_npz, root, **overrides))
  )


_start = script_runs.start
_run = script_runs.run
_rows = script_runs.rows


def _files(run_dir):
  """(path, size, mtime) of every file under `run_dir` but its lock file."""
  found = []
  for parent, _, names in os.walk(run_dir):
    for name in names:
      if name == '.lock' and parent == run_dir:
        continue  # Held by the refused run while it read the record.
      stat = os.stat(os.path.join(parent, name))
      found.append((os.path.join(parent, name), stat.st_size, stat.st_mtime_ns))
  return sorted(found)


def _stop(process):
  if process.poll() is None:
    process.kill()
  process.communicate(timeout=60)


@pytest.fixture(scope='module')
def lone(data_npz, tmp_path_factory, tff_execution_context):
  """The uninterrupted run's metrics.csv rows (run once, in this process, on
  the session's TFF worker: tests/experiments/session_worker.py)."""
  root = str(tmp_path_factory.mktemp('lone'))
  with session_worker.local_runs_on(tff_execution_context):
    summary = _run_in_process(data_npz, root)
  assert summary['resumed_from_round'] is None
  assert summary['total_rounds'] == _ROUNDS
  return _rows(os.path.join(root, 'run'))


def _first_to_end(processes, timeout_seconds=300):
  """The process of `processes` that exits first (the others run on)."""
  deadline = time.monotonic() + timeout_seconds
  while True:
    ended = [p for p in processes if p.poll() is not None]
    if ended:
      return ended[0]
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.05)


def _stop_lock_holder(processes, run_dir, timeout_seconds=300):
  """SIGSTOPs the process of `processes` that holds `run_dir`, once it does.

  Returns:
    The stopped process (it keeps the lock; SIGCONT it), or None if one of
    `processes` exits first.
  """
  by_pid = {p.pid: p for p in processes}
  deadline = time.monotonic() + timeout_seconds
  while all(p.poll() is None for p in processes):
    holder = by_pid.get(run_lock.holder_pid(run_dir))
    if holder is not None:
      os.kill(holder.pid, signal.SIGSTOP)
      return holder
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.02)
  return None


def test_second_launch_is_refused_and_first_ends_as_lone_run(
    data_npz, tmp_path, lone
):
  # Both launched at once: whichever takes the lock first trains; it is
  # stopped while it holds the lock, until the other one ends (refused).
  command = _command(data_npz, str(tmp_path))
  run_dir = str(tmp_path / 'run')
  launched = [_start(command), _start(command)]
  try:
    stopped = _stop_lock_holder(launched, run_dir)
    try:
      refused = _first_to_end(launched)
      (holder,) = [p for p in launched if p is not refused]
      assert holder.poll() is None, 'both ended: nothing was tested'
      assert stopped in (None, holder)
    finally:
      if stopped is not None:
        os.kill(stopped.pid, signal.SIGCONT)
    stdout, stderr = refused.communicate(timeout=60)
    assert refused.returncode == 1, stderr[-3000:]
    assert stdout == f'run: outputs in {run_dir}\n'  # Nothing trained.
    assert stderr.splitlines() == [
        f'run_experiment.py: {run_dir} is in use by another run (pid '
        f'{holder.pid} holds {run_dir}/.lock); one process at a time writes '
        'a run directory: wait for it to end, or use another '
        '--experiment_name.'
    ]
    _, stderr = holder.communicate(timeout=600)
    assert holder.returncode == 0, stderr[-3000:]
  finally:
    for process in launched:
      _stop(process)
  rows = _rows(run_dir)
  assert [row['round_num'] for row in rows] == [
      str(t) for t in range(1, _ROUNDS + 1)
  ]
  assert rows == lone


@pytest.fixture(scope='module')
def two_rounds(data_npz, tmp_path_factory):
  """A run of 2 rounds (in this process: only its files are used): its root."""
  root = str(tmp_path_factory.mktemp('two_rounds'))
  summary = _run_in_process(data_npz, root, total_rounds=2)
  assert summary['total_rounds'] == 2
  return root


@pytest.mark.parametrize(
    'flags, named',
    [
        (
            dict(client_learning_rate=0.5),
            '--client_learning_rate 0.05 there, 0.5 now',
        ),
        (
            dict(dirichlet_alpha=1.0, client_batch_size=5, window_size=2),
            '--dirichlet_alpha 0.05 there, 1.0 now; --window_size 0 there, 2 '
            'now; --client_batch_size 10 there, 5 now',
        ),
    ],
)
def test_resume_with_other_flags_is_refused(data_npz, two_rounds, flags, named):
  run_dir = os.path.join(two_rounds, 'run')
  before = _files(run_dir)
  result = _run(_command(data_npz, two_rounds, total_rounds=4, **flags))
  assert result.returncode == 1
  assert result.stdout == f'run: outputs in {run_dir}\n'  # Nothing trained.
  assert result.stderr.splitlines() == [
      f'run_experiment.py: {run_dir} holds a run started with other flags '
      f'({named}); to resume it pass the flags recorded in '
      f'{run_dir}/run_config.json, or start a new run with another '
      '--experiment_name.'
  ]
  assert _files(run_dir) == before


def test_longer_total_rounds_resumes(data_npz, two_rounds, tmp_path, lone):
  # A copy elsewhere (a moved run resumes too), so the fixture stays 2 rounds.
  root = str(tmp_path / 'moved')
  shutil.copytree(two_rounds, root)
  result = _run(_command(data_npz, root, total_rounds=4))
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.startswith(
      f'run: outputs in {root}/run\n'
      'run: resuming from the checkpoint of round 2 '
  )
  assert _rounds_trained(result.stdout) == [3, 4]
  # The record stays the first start's.
  with open(os.path.join(root, 'run', 'run_config.json')) as f:
    assert json.load(f)['config']['total_rounds'] == 2
  # Rounds 1-4 of the longer lone run: --total_rounds changes no number.
  assert _rows(os.path.join(root, 'run')) == lone[:4]


def _rounds_trained(stdout):
  """The rounds of the progress lines in `stdout`."""
  return [int(m[1]) for m in re.finditer(r'^run: round (\d+)/', stdout, re.M)]


def _read_until_round(process, round_num):
  """Progress lines until the one of `round_num` (which must come)."""
  lines = []
  while not lines or not lines[-1].startswith(f'run: round {round_num}/'):
    line = process.stdout.readline()
    assert line, process.communicate()[1][-3000:]
    lines.append(line)
  return lines


def test_killed_worker_is_one_line_then_a_rerun_finishes(
    data_npz, tmp_path, lone, capsys
):
  workers = [runtime.start_local_worker(log_dir=str(tmp_path))]
  address = workers[0].address
  command = _command(data_npz, str(tmp_path), workers=address)
  run_dir = str(tmp_path / 'run')
  run = _start(command)
  try:
    printed = _read_until_round(run, _KILL_AFTER)
    os.kill(run.pid, signal.SIGSTOP)  # No round ends until the worker is dead.
    try:
      workers[0].kill()
    finally:
      os.kill(run.pid, signal.SIGCONT)
    stdout, stderr = run.communicate(timeout=300)
    last = _rounds_trained(''.join(printed) + stdout)[-1]
    kept = [
        int(m[1])
        for m in map(
            re.compile(r'program_state_(\d+)').fullmatch,
            os.listdir(os.path.join(run_dir, 'checkpoints')),
        )
        if m
    ]
    resume = max(kept)
    assert resume % _EVERY == 0 and last - _EVERY < resume <= last
    assert run.returncode == 1
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith(f'run_experiment.py: TFF worker {address} ')
    assert lines[0].endswith(
        f'The run stopped; a rerun resumes from the checkpoint of round '
        f'{resume} in {run_dir}/checkpoints: restart the worker at {address} '
        '(or list another in --workers) and rerun the same command.'
    )
    workers.append(runtime.start_local_worker(port=workers[0].port))
    # The rerun in this process (its outputs are what it shows), on the
    # restarted worker as the user's rerun would be.
    capsys.readouterr()
    _run_in_process(data_npz, str(tmp_path), workers=address)
    rerun = capsys.readouterr().out
    assert rerun.splitlines()[0].startswith(
        f'run: resuming from the checkpoint of round {resume} '
    ), rerun
    assert _rounds_trained(rerun) == list(range(resume + 1, _ROUNDS + 1))
  finally:
    _stop(run)
    for worker in workers:
      worker.kill()
  assert _rows(run_dir) == lone
