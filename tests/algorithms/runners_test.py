"""Tests for tff_fedwin.algorithms.runners: the RoundRunners of our processes.

Each runner runs real `build_fed_win` / `build_scaffold` processes on the
softmax task of tests/softmax_task.py; expected values come from the
process's own `next` on the same inputs (the runner adds no arithmetic) and
from numpy means of the global models for the window.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import numpy_reference
from tests import softmax_task as task
from tff_fedwin.algorithms import client_data_bundle
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold
from tff_fedwin.training import runner as runner_lib

_leaves = task.leaves
_IDS = [task.CLIENT_IDS[3], task.CLIENT_IDS[1]]


@pytest.fixture(scope='module')
def processes():
  return task.build_processes(with_scaffold_window=True)


def _template():
  return scaffold.initial_client_state(task.model_fn)


def _assert_equal_leaves(actual, expected):
  actual, expected = _leaves(actual), _leaves(expected)
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    np.testing.assert_array_equal(a, e)


def _assert_window_is_mean_of_last_two(runner, state, datasets, states):
  """After 3 rounds of W = 2: m^3 = (w^2 + w^3) / 2 (WiMA Eq. 4), not w^3.

  The global models w^0..w^3 are recorded from the runner; the window must be
  their numpy mean over the last two (w^1 has left it) and differ from the
  global model w^3 read next to it.
  """
  models = [_leaves(runner.global_model_weights(state).trainable)]
  for _ in range(3):
    state, states, _ = runner.run_round(state, datasets, states)
    models.append(_leaves(runner.global_model_weights(state).trainable))

  window = _leaves(runner.window_model_weights(state).trainable)

  assert len(window) == len(models[0])
  for i, actual in enumerate(window):
    recorded = np.stack([m[i].astype(np.float64) for m in models])
    expected = numpy_reference.window_mean_eq4(recorded, t=3, window_size=2)
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-7)
  assert not np.allclose(window[0], models[3][0])  # m^3 is not w^3.
  assert not np.allclose(models[1][0], models[3][0])  # w^1 would show.


def _assert_is_a_round_runner(runner, process):
  assert runner_lib.check_runner(runner) is None
  assert isinstance(runner, runner_lib.RoundRunner)
  assert runner.process is process
  assert runner.takes_client_ids is False  # No computation.


class TestLearningProcessRunner:

  def test_is_a_round_runner(self, processes):
    _assert_is_a_round_runner(
        runners.LearningProcessRunner(processes['fedavg']), processes['fedavg']
    )

  def test_keeps_no_client_states(self, processes):
    runner = runners.LearningProcessRunner(processes['fedavg'])
    assert runner.initial_client_state() is None

  def test_run_round_is_one_process_next(self, processes):
    process = processes['fedavg']
    runner = runners.LearningProcessRunner(process)
    expected = process.next(process.initialize(), task.datasets(_IDS))

    state, new_client_states, metrics = runner.run_round(
        runner.initialize(), task.datasets(_IDS), None
    )

    assert new_client_states is None
    _assert_equal_leaves(state, expected.state)
    _assert_equal_leaves(metrics, expected.metrics)
    assert not np.array_equal(
        _leaves(state.global_model_weights)[0],
        _leaves(process.initialize().global_model_weights)[0],
    )

  def test_run_round_rejects_client_states(self, processes):
    runner = runners.LearningProcessRunner(processes['fedavg'])
    with pytest.raises(ValueError, match='`client_states`'):
      runner.run_round(runner.initialize(), task.datasets(_IDS), [1, 2])

  def test_without_window_evaluates_global_model(self, processes):
    runner = runners.LearningProcessRunner(processes['fedavg'])
    state, _, _ = runner.run_round(
        runner.initialize(), task.datasets(_IDS), None
    )

    _assert_equal_leaves(
        runner.window_model_weights(state), state.global_model_weights
    )
    _assert_equal_leaves(
        runner.global_model_weights(state), state.global_model_weights
    )

  def test_window_model_is_mean_of_last_two_models(self, processes):
    runner = runners.LearningProcessRunner(processes['window'])
    _assert_window_is_mean_of_last_two(
        runner, runner.initialize(), task.datasets(_IDS), None
    )

  def test_rejects_a_process_that_is_no_learning_process(self, processes):
    with pytest.raises(ValueError, match='`process`'):
      runners.LearningProcessRunner(processes['scaffold'])


class TestScaffoldRunner:

  def test_is_a_round_runner(self, processes):
    _assert_is_a_round_runner(
        runners.ScaffoldRunner(processes['scaffold'], _template()),
        processes['scaffold'],
    )

  def test_initial_client_state_is_the_given_one(self, processes):
    template = _template()
    runner = runners.ScaffoldRunner(processes['scaffold'], template)
    assert runner.initial_client_state() is template
    for leaf in _leaves(template):
      np.testing.assert_array_equal(leaf, np.zeros_like(leaf))

  def test_run_round_returns_the_process_client_states(self, processes):
    process = processes['scaffold']
    template = _template()
    runner = runners.ScaffoldRunner(process, template)
    expected_state, expected_states, expected_metrics = process.next(
        process.initialize(), task.datasets(_IDS), [template, template]
    )

    state, new_client_states, metrics = runner.run_round(
        runner.initialize(), task.datasets(_IDS), [template, template]
    )

    assert isinstance(new_client_states, list)
    assert len(new_client_states) == 2
    _assert_equal_leaves(state, expected_state)
    _assert_equal_leaves(metrics, expected_metrics)
    for actual, expected in zip(new_client_states, expected_states):
      _assert_equal_leaves(actual, expected)
      assert all(np.any(leaf != 0) for leaf in _leaves(actual))

  def test_without_window_evaluates_global_model(self, processes):
    # After rounds (not initialize(), where any window is the global
    # model): without a window the model to evaluate is the trained w^t.
    runner = runners.ScaffoldRunner(processes['scaffold'], _template())
    initial = runner.initialize()
    state, states = initial, [_template(), _template()]
    for _ in range(2):
      state, states, _ = runner.run_round(state, task.datasets(_IDS), states)

    _assert_equal_leaves(
        runner.window_model_weights(state), state.global_model_weights
    )
    _assert_equal_leaves(
        runner.global_model_weights(state), state.global_model_weights
    )
    assert not np.array_equal(
        _leaves(state.global_model_weights)[0],
        _leaves(initial.global_model_weights)[0],
    )

  def test_window_model_is_mean_of_last_two_models(self, processes):
    template = _template()
    runner = runners.ScaffoldRunner(processes['scaffold_window'], template)
    _assert_window_is_mean_of_last_two(
        runner, runner.initialize(), task.datasets(_IDS), [template, template]
    )

  @pytest.mark.parametrize(
      'kind, initial_state, argument',
      [
          ('fedavg', 'template', '`process`'),
          ('scaffold', None, '`initial_client_state`'),
          ('scaffold', (), '`initial_client_state`'),
      ],
  )
  def test_rejects_wrong_arguments(
      self, processes, kind, initial_state, argument
  ):
    if initial_state == 'template':
      initial_state = _template()
    with pytest.raises(ValueError, match=argument):
      runners.ScaffoldRunner(processes[kind], initial_state)


class TestScaffoldRunnerStateFiles:
  """client_state_transfer='files': the runner writes and reads the files."""

  @pytest.mark.parametrize(
      'kwargs',
      [
          {},
          # SCAFFOLD + WSM + IMA: everything that touches a client state.
          dict(
              client_loss='wsm',
              num_classes=task.NUM_CLASSES,
              window_size=2,
              window_mode='broadcast',
          ),
      ],
      ids=['scaffold', 'scaffold_wsm_ima'],
  )
  def test_rounds_give_the_bits_of_the_values_transfer(self, tmp_path, kwargs):
    build = lambda transfer: scaffold.build_scaffold(
        task.model_fn,
        client_learning_rate=0.2,
        total_clients=task.NUM_CLIENTS,
        client_state_transfer=transfer,
        **kwargs,
    )
    values = runners.ScaffoldRunner(build('values'), _template())
    files = runners.ScaffoldRunner(
        build('files'), _template(), state_files_dir=str(tmp_path / 'round')
    )
    runs = []
    for runner in (values, files):
      state, client_states = runner.initialize(), [_template(), _template()]
      for ids in (_IDS, _IDS[::-1], _IDS):  # Each client's c_i evolves.
        state, client_states, metrics = runner.run_round(
            state, task.datasets(ids), client_states[::-1]
        )
      runs.append((state, client_states, metrics))
    for actual, expected in zip(*runs):
      _assert_equal_leaves(actual, expected)
    assert all(np.any(leaf != 0) for leaf in _leaves(runs[1][1]))
    assert (tmp_path / 'round').stat().st_mode & 0o777 == 0o700

  @pytest.mark.parametrize(
      'kind, directory',
      [('files', None), ('values', 'round')],
  )
  def test_state_files_dir_exactly_with_files(self, tmp_path, kind, directory):
    process = scaffold.build_scaffold(
        task.model_fn,
        client_learning_rate=0.2,
        total_clients=task.NUM_CLIENTS,
        client_state_transfer=kind,
    )
    with pytest.raises(ValueError, match='`state_files_dir`'):
      runners.ScaffoldRunner(
          process,
          _template(),
          state_files_dir=directory and str(tmp_path / directory),
      )


class TestDatasetComputation:
  """The workers build the datasets from ids (a bundle, or a database)."""

  @pytest.mark.parametrize('source', ['bundle', 'sql'])
  @pytest.mark.parametrize('server_files', [False, True])
  @pytest.mark.parametrize('kind', ['fedavg', 'scaffold'])
  def test_rounds_give_the_bits_of_sent_datasets(
      self, processes, tmp_path, kind, server_files, source
  ):
    computation = (
        _source_client_data(source, tmp_path)
        .preprocess(task.preprocess_fn)
        .dataset_computation
    )
    runs = []
    for by_id in (False, True):
      runner = _runner(
          processes,
          kind,
          dataset_computation=computation if by_id else None,
          server_state_dir=(
              str(tmp_path / f'server{by_id}') if server_files else None
          ),
      )
      state = runner.initialize()
      client_states = _client_states(runner, len(_IDS))
      for ids in (_IDS, _IDS[::-1]):
        state, client_states, metrics = runner.run_round(
            state, ids if by_id else task.datasets(ids), client_states
        )
      runs.append((state, client_states, metrics))
    for actual, expected in zip(*runs):
      _assert_equal_leaves(actual, expected)
    kernel = _leaves(runner.global_model_weights(state).trainable)[0]
    assert not np.allclose(kernel, task.INITIAL_KERNEL)  # It trained.

  def test_rejects_a_computation_of_other_elements(self, processes):
    other = tff.tensorflow.computation(
        lambda client_id: tf.data.Dataset.range(3), np.str_
    )
    # TFF's own check, a TypeError: the process's client data are datasets
    # of the task's batches, not of int64.
    with pytest.raises(TypeError, match='No sequence parameter assignable'):
      runners.LearningProcessRunner(
          processes['fedavg'], dataset_computation=other
      )


def _source_client_data(source, directory):
  """The task's clients as a tensor bundle, or in a database as TFF's
  EMNIST loader gives them (a parsing preprocess over `SqlClientData`:
  queries the worker runs by id)."""
  if source == 'bundle':
    return client_data_bundle.write_client_data_bundle(
        task.CLIENT_DATA, str(directory / 'clients')
    )
  database = str(directory / 'clients.sqlite')
  tff.simulation.datasets.save_to_sql_client_data(
      task.CLIENT_IDS, task.CLIENT_DATA.serializable_dataset_fn, database
  )
  return tff.simulation.datasets.load_and_parse_sql_client_data(
      database, task.CLIENT_DATA.element_type_structure
  )


def _runner(processes, kind, **kwargs):
  if kind.startswith('scaffold'):
    return runners.ScaffoldRunner(processes[kind], _template(), **kwargs)
  return runners.LearningProcessRunner(processes[kind], **kwargs)


def _client_states(runner, count):
  template = runner.initial_client_state()
  return None if template is None else [template] * count


class TestStateExtraWindows:

  @pytest.mark.parametrize('kind', ['window', 'scaffold_window'])
  def test_extra_window_of_one_is_the_newest_model(self, processes, kind):
    # The state's window is W = 2; W' = 1 is the mean of the last one model:
    # w^t itself (WiMA Eq. 4 with W' = 1), active from round 1, at distance
    # 0 from w^t. The oldest slot would give w^{t-1} instead.
    runner = _runner(processes, kind, extra_window_sizes=(1,))
    datasets = task.datasets(_IDS)
    state = runner.initialize()
    state, states, _ = runner.run_round(
        state, datasets, _client_states(runner, 2)
    )
    state, _, metrics = runner.run_round(state, datasets, states)
    models = runner.extra_window_models(state)
    assert list(models) == ['window_1']
    _assert_equal_leaves(
        models['window_1'].trainable,
        runner.global_model_weights(state).trainable,
    )
    assert dict(metrics['window_1']) == {
        'window_fill': 1,
        'window_active': True,
        'window_distance': 0.0,
    }

  def test_broadcast_measures_the_distance_to_the_aggregated_model(self):
    # IMA mode, W = 2, active from round 2: the state's global model is then
    # m^2, but W' = 1 is w^2, the model the round aggregated; its distance
    # to w^2 is 0 (the main window's distance is ||m^2 - w^2|| > 0).
    process = fed_win.build_fed_win(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(learning_rate=0.5),
        window_size=2,
        window_mode='broadcast',
    )
    runner = runners.LearningProcessRunner(process, extra_window_sizes=(1,))
    state = runner.initialize()
    for _ in range(2):
      state, _, metrics = runner.run_round(state, task.datasets(_IDS), None)
    assert metrics['window_1']['window_distance'] == 0.0
    assert bool(metrics['window_1']['window_active'])
    assert metrics['finalizer']['window']['window_distance'] > 0.0

  @pytest.mark.parametrize(
      'kind,sizes,message',
      [
          ('window', (3,), 'cannot be read from a window of W = 2'),
          ('window', (2,), 'must not repeat window_size'),
          ('fedavg', (1,), 'exactly one window'),
          ('scaffold_window', (5,), 'cannot be read'),
          ('scaffold', (1,), 'exactly one window'),
      ],
  )
  def test_initialize_rejects_sizes_the_window_does_not_hold(
      self, processes, kind, sizes, message
  ):
    runner = _runner(processes, kind, extra_window_sizes=sizes)
    with pytest.raises(ValueError, match=message):
      runner.initialize()

  @pytest.mark.parametrize('sizes', [(0,), (1, 1), (True,), ('2',)])
  def test_rejects_sizes_that_are_no_distinct_positive_ints(
      self, processes, sizes
  ):
    with pytest.raises(ValueError, match='extra_window_sizes'):
      _runner(processes, 'window', extra_window_sizes=sizes)
