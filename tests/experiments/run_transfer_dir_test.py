"""Tests for a run's transfer directory in `--shared_dir`: its own, held.

`tff_fedwin.experiments.run`'s `transfer_dir_held` and
`client_data_removed_at_exit`, with `registry.transfer_dirs` and the run id of
`run_record`. Nothing trains: the other driver is a small Python subprocess
that loads run_lock.py by its path (stdlib only) and holds or tries the
transfer directory's lock.
"""

import json
import os

import attrs
import pytest

from tff_fedwin import experiments
from tff_fedwin.experiments import forks
from tff_fedwin.experiments import registry
from tff_fedwin.experiments import run as run_lib
from tff_fedwin.experiments import run_record
from tff_fedwin.experiments import task_defaults
from tff_fedwin.training import run_lock

from tests.experiments import tiny_data
from tests.training import lock_holder

_ID_A = '0123456789abcdef0123456789abcdef'
_ID_B = 'fedcba9876543210fedcba9876543210'


def _config(root, shared, **overrides):
  return experiments.ExperimentConfig(
      root_output_dir=str(root),
      experiment_name='run',
      shared_dir=str(shared),
      **overrides,
  )


@pytest.fixture
def other_driver():
  """`hold(directory)`: another process holds it until the test ends."""
  started = []

  def hold(directory):
    process = lock_holder.start_holder(directory)
    started.append(process)
    return process

  yield hold
  for process in started:
    process.kill()
    process.wait(timeout=30)
    process.stdout.close()


def _fill(directory):
  """Transfer files as a run leaves them: state files, a client data bundle."""
  for name, leaf in (
      ('server_state_files', 'state.a'),
      ('client_state_files', '0.npz'),
      ('client_data', 'train.index'),
  ):
    os.makedirs(os.path.join(directory, name), exist_ok=True)
    with open(os.path.join(directory, name, leaf), 'w') as f:
      f.write(name)


def _tree(directory):
  return sorted(
      os.path.relpath(os.path.join(parent, name), directory)
      for parent, _, names in os.walk(directory)
      for name in names
  )


def test_a_driver_of_the_same_run_is_refused_with_one_line(
    tmp_path, other_driver
):
  # The same run directory resumed twice at once (e.g. from two hosts
  # through a shared mount): the same run id, the same transfer directory.
  config = _config(tmp_path / 'out', tmp_path / 'shared')
  root = str(tmp_path / 'shared' / f'run-{_ID_A}')
  holder = other_driver(root)
  with pytest.raises(
      run_lock.TransferDirectoryLockedError, match=f'^{root} is in use'
  ) as info:
    with run_lib.transfer_dir_held(config, _ID_A):
      pytest.fail('entered a transfer directory another driver holds')
  assert str(info.value) == (
      f'{root} is in use by another driver (pid {holder.pid} on its host '
      f'holds {root}/.lock): it holds the transfer files of one run, named by '
      'the run_id in its run_config.json, and that run is running elsewhere '
      '(the same run directory resumed twice, or a copy of it); stop the '
      'other driver, or give a copy its own id by deleting run_id from its '
      'run_config.json.'
  )
  assert (info.value.run_dir, info.value.pid) == (root, holder.pid)
  assert isinstance(info.value, experiments.RunDirectoryLockedError)
  # Another run of the same name and --shared_dir is not held up.
  with run_lib.transfer_dir_held(config, _ID_B):
    pass


def test_the_transfer_directory_is_held_for_the_block_and_released_on_error(
    tmp_path,
):
  config = _config(tmp_path / 'out', tmp_path / 'shared')
  root = str(tmp_path / 'shared' / f'run-{_ID_A}')
  with pytest.raises(RuntimeError, match='^the round failed$'):
    with run_lib.transfer_dir_held(config, _ID_A):
      assert run_lock.is_held(root)
      assert lock_holder.try_in_other_process(root).startswith(
          f'{root} is in use by another run'
      )
      raise RuntimeError('the round failed')
  assert not run_lock.is_held(root)
  assert lock_holder.try_in_other_process(root) == 'took it'


def test_without_shared_dir_the_run_directory_lock_is_the_one(tmp_path):
  config = attrs.evolve(_config(tmp_path, tmp_path), shared_dir=None)
  with run_lock.hold(str(tmp_path / 'run')):
    with run_lib.transfer_dir_held(config, _ID_A):
      assert os.listdir(tmp_path / 'run') == ['.lock']
    assert run_lock.is_held(str(tmp_path / 'run'))  # Still the run's.


def test_exit_removes_only_its_own_client_data(tmp_path):
  config = _config(tmp_path / 'out', tmp_path / 'shared')
  own = str(tmp_path / 'shared' / f'run-{_ID_A}')
  neighbour = str(tmp_path / 'shared' / f'run-{_ID_B}')
  _fill(own)
  _fill(neighbour)
  with pytest.raises(RuntimeError, match='^the round failed$'):
    with run_lib.client_data_removed_at_exit(config, _ID_A):
      raise RuntimeError('the round failed')
  assert _tree(own) == [
      'client_state_files/0.npz',
      'server_state_files/state.a',
  ]
  assert _tree(neighbour) == [
      'client_data/train.index',
      'client_state_files/0.npz',
      'server_state_files/state.a',
  ]
  assert sorted(os.listdir(tmp_path / 'shared')) == [
      f'run-{_ID_A}',
      f'run-{_ID_B}',
  ]


def _recorded_run_id(run_dir):
  with open(os.path.join(run_dir, 'run_config.json')) as f:
    return json.load(f)['run_id']


def test_run_experiment_of_a_held_run_is_refused_before_training(
    data_npz, tmp_path, other_driver
):
  # The run directory is recorded already (a resume); its transfer
  # directory in --shared_dir is held by another driver.
  shared = tmp_path / 'shared'
  config = tiny_data.config(
      data_npz, tmp_path / 'out', 'run', shared_dir=str(shared)
  )
  task = run_lib.create_task(config)
  run_dir = str(tmp_path / 'out' / 'run')
  run_id = run_record.check_or_write(
      task_defaults.with_defaults_of_task(config, task), run_dir
  )
  root = registry.transfer_dirs(config, run_id).root
  assert root == f'{shared}/run-{run_id}'
  other_driver(root)
  with pytest.raises(
      run_lock.TransferDirectoryLockedError, match=f'^{root} is in use '
  ):
    experiments.run_experiment(config)
  # Nothing trained, the id kept, the run directory released.
  assert sorted(os.listdir(run_dir)) == ['.lock', 'run_config.json']
  assert _recorded_run_id(run_dir) == run_id
  assert not run_lock.is_held(run_dir)
  assert os.listdir(root) == ['.lock']


def test_a_fork_gets_its_own_run_id(data_npz, tmp_path, monkeypatch):
  # Only the record is checked: the forking itself (TFF) is skipped.
  monkeypatch.setattr(forks, '_fork_held', lambda *args: None)
  trunk = tiny_data.config(
      data_npz,
      tmp_path,
      'trunk',
      total_rounds=6,
      rounds_per_eval=1,
      window_size=2,
      window_mode='broadcast',
      window_start_round=5,
      server_learning_rate=1.0,
      shared_dir=str(tmp_path / 'shared'),
  )
  target = attrs.evolve(
      trunk,
      experiment_name='target',
      window_size=0,
      window_mode='evaluate',
      window_start_round=0,
  )
  trunk_id = run_record.check_or_write(trunk, forks.run_dir(trunk))
  assert forks.fork_round(trunk, target) == 4
  forks.fork_config_run(trunk, target, 4)
  target_id = _recorded_run_id(forks.run_dir(target))
  assert target_id != trunk_id
  assert _recorded_run_id(forks.run_dir(trunk)) == trunk_id
  assert registry.transfer_dirs(target, target_id).root == (
      f'{tmp_path}/shared/target-{target_id}'
  )
