"""The server state kept in worker-side files: the runners' `server_state_dir`.

Expected values are the same runner's rounds with the state sent as TFF
values (the files add no arithmetic: `next` is the process's own), on the
softmax task of tests/softmax_task.py; every comparison is bit for bit.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin.algorithms import resident_state
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold

_IDS = [task.CLIENT_IDS[3], task.CLIENT_IDS[1]]
_KINDS = ['fedavg', 'window', 'scaffold', 'scaffold_window', 'scaffold_files']


@pytest.fixture(scope='module')
def processes():
  built = task.build_processes(with_scaffold_window=True)
  built['scaffold_files'] = scaffold.build_scaffold(
      task.model_fn,
      client_learning_rate=0.2,
      total_clients=task.NUM_CLIENTS,
      client_state_transfer='files',
  )
  return built


def _runner(processes, kind, tmp_path, server_state_dir=None):
  if not kind.startswith('scaffold'):
    return runners.LearningProcessRunner(
        processes[kind], server_state_dir=server_state_dir
    )
  return runners.ScaffoldRunner(
      processes[kind],
      scaffold.initial_client_state(task.model_fn),
      state_files_dir=(
          str(tmp_path / 'clients') if kind == 'scaffold_files' else None
      ),
      server_state_dir=server_state_dir,
  )


def _rounds(runner, state, client_states, order, change=None):
  """Rounds over `order`'s id lists; `change(state)` before each round."""
  outputs = []
  for ids in order:
    if change is not None:
      state = change(runner, state)
    state, client_states, metrics = runner.run_round(
        state, task.datasets(ids), client_states and client_states[::-1]
    )
    outputs.append((state, client_states, metrics))
  return outputs


def _assert_same_bits_and_types(actual, expected):
  tf.nest.assert_same_structure(actual, expected)
  assert type(actual) is type(expected)
  for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
    assert type(a) is type(e)
    assert np.asarray(a).dtype == np.asarray(e).dtype
    np.testing.assert_array_equal(a, e)


def _both_runs(processes, kind, tmp_path, change=None):
  runs = []
  for directory in (None, str(tmp_path / 'server')):
    runner = _runner(processes, kind, tmp_path, directory)
    template = runner.initial_client_state()
    client_states = None if template is None else [template, template]
    runs.append(
        _rounds(
            runner,
            runner.initialize(),
            client_states,
            (_IDS, _IDS[::-1], _IDS),
            change,
        )
    )
  return runs


@pytest.mark.parametrize('kind', _KINDS)
def test_rounds_give_the_bits_of_the_values_transfer(processes, kind, tmp_path):
  values, files = _both_runs(processes, kind, tmp_path)

  for actual, expected in zip(files, values):
    _assert_same_bits_and_types(actual, expected)
  first, last = files[0][0], files[-1][0]
  assert not np.array_equal(
      tf.nest.flatten(first.global_model_weights)[0],
      tf.nest.flatten(last.global_model_weights)[0],
  )


def _halve_model(runner, state):
  """A new state object: the global model halved (the caller's change)."""
  weights = runner.global_model_weights(state)
  halved = tff.learning.models.ModelWeights(
      trainable=[np.asarray(w) / 2 for w in weights.trainable],
      non_trainable=list(weights.non_trainable),
  )
  return runner.set_global_model_weights(state, halved)


@pytest.mark.parametrize('kind', ['fedavg', 'scaffold_files'])
def test_a_state_changed_between_rounds_is_the_one_trained(
    processes, kind, tmp_path
):
  # Each round starts from a new state object; the files must not stand in
  # for it.
  values, files = _both_runs(processes, kind, tmp_path, change=_halve_model)

  for actual, expected in zip(files, values):
    _assert_same_bits_and_types(actual, expected)


def test_an_older_state_is_trained_from_its_own_values(processes, tmp_path):
  # Round 2 again from round 1's state, after round 2 ran from it: not the
  # state the files hold.
  plain = _runner(processes, 'fedavg', tmp_path)
  resident = _runner(processes, 'fedavg', tmp_path, str(tmp_path / 's'))
  ends = []
  for runner in (plain, resident):
    first, _, _ = runner.run_round(runner.initialize(), task.datasets(_IDS))
    runner.run_round(first, task.datasets(_IDS))
    again, _, _ = runner.run_round(first, task.datasets(_IDS[::-1]))
    ends.append(again)

  _assert_same_bits_and_types(ends[1], ends[0])


def test_returned_arrays_are_read_only(processes, tmp_path):
  runner = _runner(processes, 'fedavg', tmp_path, str(tmp_path / 's'))

  state, _, _ = runner.run_round(runner.initialize(), task.datasets(_IDS))

  arrays = [x for x in tf.nest.flatten(state) if isinstance(x, np.ndarray)]
  assert arrays and not any(x.flags.writeable for x in arrays)


def test_files_are_private_to_the_user(processes, tmp_path):
  directory = tmp_path / 's'
  runner = _runner(processes, 'fedavg', tmp_path, str(directory))

  runner.run_round(runner.initialize(), task.datasets(_IDS))

  # The directory guards the worker's files (TensorFlow creates them with
  # the umask); the driver's own are 0600 as well.
  assert directory.stat().st_mode & 0o777 == 0o700
  names = sorted(os.listdir(directory))
  assert names and all(name.startswith('server_state.') for name in names)
  driver_written = [n for n in names if n.startswith('server_state.a.')]
  assert driver_written
  for name in driver_written:
    assert (directory / name).stat().st_mode & 0o777 == 0o600


def test_an_existing_directory_is_made_private(processes, tmp_path):
  directory = tmp_path / 's'
  directory.mkdir(mode=0o755)
  directory.chmod(0o755)

  resident_state.ResidentServerState(processes['fedavg'].next, str(directory))

  assert directory.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    'change, message',
    [
        (lambda leaves: leaves[:-1], 'has 3 leaves; its type has 4'),
        (
            lambda leaves: [np.zeros((2, 2), np.float32)] + leaves[1:],
            r'Leaf 0 of the server state has shape \(2, 2\); its type has '
            r'\(3, 2\)',
        ),
    ],
    ids=['leaf_count', 'leaf_shape'],
)
def test_a_state_of_another_shape_is_refused_naming_it(
    processes, tmp_path, change, message
):
  process = processes['fedavg']
  state = process.initialize()
  leaves = change([np.asarray(x) for x in tf.nest.flatten(state)])
  resident = resident_state.ResidentServerState(process.next, str(tmp_path))

  with pytest.raises(ValueError, match=message):
    resident.next(leaves, task.datasets(_IDS))


def test_a_computation_without_a_server_state_is_refused(processes):
  with pytest.raises(ValueError, match='SERVER-placed state first'):
    resident_state.build_resident_next(processes['fedavg'].initialize)
