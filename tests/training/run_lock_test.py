"""Tests for tff_fedwin.training.run_lock: one process per run directory.

The other process is `tests/training/lock_holder.py`'s small subprocess,
which holds or tries the lock.
"""

import os
import signal

import pytest

from tff_fedwin.training import run_lock

from tests.training import lock_holder


@pytest.fixture
def holder(tmp_path):
  """Starts a process holding `tmp_path / 'run'`; kills it at the end."""
  run_dir = tmp_path / 'run'
  process = lock_holder.start_holder(run_dir)
  try:
    yield process, run_dir
  finally:
    process.kill()
    process.wait(timeout=30)
    process.stdout.close()


def test_hold_creates_the_directory_and_writes_the_pid(tmp_path):
  run_dir = tmp_path / 'a' / 'run'
  with run_lock.hold(str(run_dir)):
    assert os.listdir(run_dir) == ['.lock']
    assert (run_dir / '.lock').read_text() == f'{os.getpid()}\n'
    assert run_lock.holder_pid(str(run_dir)) == os.getpid()
    assert run_lock.is_held(str(run_dir))
  # Released: no stale pid is left, and another process takes it.
  assert (run_dir / '.lock').read_text() == ''
  assert not run_lock.is_held(str(run_dir))
  assert lock_holder.try_in_other_process(run_dir) == 'took it'


def test_another_process_is_refused_with_directory_and_pid(tmp_path):
  run_dir = tmp_path / 'run'
  with run_lock.hold(str(run_dir)):
    line = lock_holder.try_in_other_process(run_dir)
  assert line == (
      f'{run_dir} is in use by another run (pid {os.getpid()} holds '
      f'{run_dir}/.lock); one process at a time writes a run directory: wait '
      'for it to end, or use another --experiment_name.'
  )


def test_this_process_is_refused_while_another_holds(holder):
  process, run_dir = holder
  with pytest.raises(
      run_lock.RunDirectoryLockedError, match=f'pid {process.pid} holds'
  ) as info:
    with run_lock.hold(str(run_dir)):
      pass
  assert info.value.pid == process.pid
  assert info.value.run_dir == str(run_dir)
  # The refused attempt changed nothing: the file still names the holder.
  assert os.listdir(run_dir) == ['.lock']
  assert (run_dir / '.lock').read_text() == f'{process.pid}\n'


def test_kernel_releases_the_lock_of_a_killed_holder(holder):
  process, run_dir = holder
  with pytest.raises(run_lock.RunDirectoryLockedError, match='in use'):
    with run_lock.hold(str(run_dir)):
      pass
  os.kill(process.pid, signal.SIGKILL)
  process.wait(timeout=30)
  assert process.returncode == -signal.SIGKILL
  with run_lock.hold(str(run_dir)):
    assert (run_dir / '.lock').read_text() == f'{os.getpid()}\n'


def test_nested_hold_is_a_no_op_until_the_outer_one_ends(tmp_path):
  run_dir = tmp_path / 'run'
  with run_lock.hold(str(run_dir)):
    # Another spelling of the same directory is the same hold.
    with run_lock.hold(str(tmp_path / '.' / 'run')):
      pass
    assert run_lock.is_held(str(run_dir))
    assert lock_holder.try_in_other_process(run_dir).startswith(
        f'{run_dir} is in use'
    )
  assert lock_holder.try_in_other_process(run_dir) == 'took it'


def test_released_when_the_block_raises(tmp_path):
  run_dir = tmp_path / 'run'
  with pytest.raises(ZeroDivisionError, match='division'):
    with run_lock.hold(str(run_dir)):
      _ = 1 / 0
  assert not run_lock.is_held(str(run_dir))
  assert lock_holder.try_in_other_process(run_dir) == 'took it'


def test_clear_held_keeps_only_the_lock(tmp_path):
  run_dir = tmp_path / 'run'
  (run_dir / 'checkpoints' / 'program_state_1').mkdir(parents=True)
  (run_dir / 'metrics.csv').write_text('round_num\n1\n')
  with pytest.raises(RuntimeError, match='is not held by this process'):
    run_lock.clear_held(str(run_dir))
  assert sorted(os.listdir(run_dir)) == ['checkpoints', 'metrics.csv']
  with run_lock.hold(str(run_dir)):
    run_lock.clear_held(str(run_dir))
    assert os.listdir(run_dir) == ['.lock']
    assert lock_holder.try_in_other_process(run_dir).startswith(
        f'{run_dir} is in use'
    )
