"""`ProgramWindowRunner`: the window kept by the program, vs numpy.

FedAvg(M) on tests/linear_task.py against tests/numpy_reference.py (WiMA
Eq. 4, IMA Algorithm 1) and SCAFFOLD against tests/scaffold_reference.py, for
both modes and windows that become active at W or at the start round.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear_task
from tests import scaffold_reference as sref
from tff_fedwin import aggregators
from tff_fedwin import training
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import program_window_runner
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold

# (W, start_round, mode): active from round W, or from start_round > W.
WINDOW_CASES = [
    (window_size, start_round, mode)
    for window_size, start_round in ((2, 0), (3, 5))
    for mode in ('evaluate', 'broadcast')
]
ROUNDS = 7
ATOL = 2e-5


def _program_window(window_size, start_round, mode):
  return aggregators.ProgramWindow(
      window_size=window_size, mode=mode, start_round=start_round
  )


def _window_measurements(expected_window, expected_w, t, window_size, active):
  """fill = min(t, W); distance = ||m^t - w^t||_2 (0 while inactive)."""
  return dict(
      window_fill=min(t, window_size),
      window_active=active,
      window_distance=np.linalg.norm(expected_window - expected_w),
  )


def _assert_measurements(measured, expected):
  assert int(measured['window_fill']) == expected['window_fill']
  assert bool(measured['window_active']) == expected['window_active']
  np.testing.assert_allclose(
      measured['window_distance'], expected['window_distance'], atol=ATOL
  )


@pytest.fixture(scope='module')
def fed_avg_processes():
  """FedAvg and FedAvgM (momentum 0.9) without a window, built once."""
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=linear_task.CLIENT_LR)
  return {
      momentum: fed_win.build_fed_win(
          linear_task.model_fn,
          sgd,
          tff.learning.optimizers.build_sgdm(1.0, momentum=momentum or None),
      )
      for momentum in (0.0, 0.9)
  }


@pytest.mark.parametrize('momentum', [0.0, 0.9])
@pytest.mark.parametrize('window_size, start_round, mode', WINDOW_CASES)
def test_fed_avg_rounds_match_numpy(
    fed_avg_processes, tmp_path, momentum, window_size, start_round, mode
):
  runner = program_window_runner.ProgramWindowRunner(
      runners.LearningProcessRunner(fed_avg_processes[momentum]),
      _program_window(window_size, start_round, mode),
  )
  expected = linear_task.simulate(
      window_size, mode, start_round, ROUNDS, server_momentum=momentum
  )
  state = runner.initialize()
  runner.open_files(str(tmp_path), None, state)
  for t in range(1, ROUNDS + 1):
    state, client_states, metrics = runner.run_round(
        state, linear_task.client_datasets(), None
    )
    assert client_states is None
    np.testing.assert_allclose(
        linear_task.kernel(runner.global_model_weights(state)),
        expected['sent'][t],
        atol=ATOL,
        err_msg=f'round {t}',
    )
    np.testing.assert_allclose(
        linear_task.kernel(runner.window_model_weights(state)),
        expected['window'][t],
        atol=ATOL,
        err_msg=f'round {t}',
    )
    _assert_measurements(
        metrics['window'],
        _window_measurements(
            expected['window'][t],
            expected['aggregated'][t],
            t,
            window_size,
            expected['active'][t],
        ),
    )


@pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
def test_extra_windows_are_means_of_the_same_trajectory(
    fed_avg_processes, tmp_path, mode
):
  # Main window W = 2 (its numpy trajectory: IMA sends m^t in broadcast
  # mode); extra windows of 1, 4 and 6 of the same w^t, evaluated only.
  extra_sizes = (4, 1, 6)
  runner = program_window_runner.ProgramWindowRunner(
      runners.LearningProcessRunner(fed_avg_processes[0.0]),
      aggregators.ProgramWindow(
          window_size=2, mode=mode, extra_window_sizes=extra_sizes
      ),
  )
  expected = linear_task.simulate(2, mode, 0, ROUNDS)
  state = runner.initialize()
  runner.open_files(str(tmp_path), None, state)
  for t in range(1, ROUNDS + 1):
    state, _, metrics = runner.run_round(
        state, linear_task.client_datasets(), None
    )
    extras = runner.extra_window_models(state)
    # Under IMA also the round's raw aggregate w^t (the newest file).
    aggregate = ['aggregate'] if mode == 'broadcast' else []
    assert list(extras) == [f'window_{w}' for w in extra_sizes] + aggregate
    if aggregate:
      np.testing.assert_allclose(
          linear_task.kernel(extras['aggregate']),
          expected['aggregated'][t],
          atol=ATOL,
      )
    for size in extra_sizes:
      # WiMA Eq. 4 over the aggregated models w^{t-W'+1} .. w^t; before
      # round W' the model to evaluate is the global model (sent).
      active = t >= size
      window = (
          np.mean(
              [expected['aggregated'][k] for k in range(t - size + 1, t + 1)],
              axis=0,
          )
          if active
          else expected['sent'][t]
      )
      np.testing.assert_allclose(
          linear_task.kernel(extras[f'window_{size}']),
          window,
          atol=ATOL,
          err_msg=f'round {t}, W = {size}',
      )
      _assert_measurements(
          metrics[f'window_{size}'],
          _window_measurements(
              window if active else expected['aggregated'][t],
              expected['aggregated'][t],
              t,
              size,
              active,
          ),
      )
    np.testing.assert_allclose(
        linear_task.kernel(runner.window_model_weights(state)),
        expected['window'][t],
        atol=ATOL,
    )


@pytest.fixture(scope='module')
def scaffold_process():
  return sref.process_builder()()


@pytest.mark.parametrize('window_size, start_round, mode', WINDOW_CASES)
def test_scaffold_rounds_match_numpy(
    scaffold_process, tmp_path, window_size, start_round, mode
):
  runner = program_window_runner.ProgramWindowRunner(
      runners.ScaffoldRunner(
          scaffold_process, scaffold.initial_client_state(sref.model_fn)
      ),
      _program_window(window_size, start_round, mode),
  )
  expected = sref.np_simulate(
      ROUNDS, window_size=window_size, mode=mode, start_round=start_round
  )
  store = {}
  state = runner.initialize()
  runner.open_files(str(tmp_path), None, state)
  initial = runner.initial_client_state()
  for t in range(1, ROUNDS + 1):
    sampled = sref.sampled_clients(t)
    state, new_states, metrics = runner.run_round(
        state,
        [sref.make_dataset(sref.CLIENT_DATA[i]) for i in sampled],
        [store.get(i, initial) for i in sampled],
    )
    store.update(zip(sampled, new_states))
    round_expected = expected[t - 1]
    sref.assert_close(
        runner.global_model_weights(state).trainable,
        round_expected.global_params,
    )
    sref.assert_close(
        runner.window_model_weights(state).trainable,
        round_expected.window_params,
    )
    for i, control in enumerate(round_expected.client_controls):
      if i in store:
        sref.assert_close(store[i].control_variate, control)
    _assert_measurements(
        metrics['window'],
        dict(
            window_fill=round_expected.window_fill,
            window_active=round_expected.window_active,
            window_distance=round_expected.window_distance,
        ),
    )


def test_broadcast_needs_a_runner_that_sets_the_model():

  class NoSetter(training.RoundRunner):
    """The five required methods only (never called here)."""

    initialize = initial_client_state = lambda self: None
    run_round = lambda self, state, datasets, client_states: None
    global_model_weights = window_model_weights = lambda self, state: None

  with pytest.raises(ValueError, match='NoSetter has none'):
    program_window_runner.ProgramWindowRunner(
        NoSetter(), _program_window(2, 0, 'broadcast')
    )
  with pytest.raises(ValueError, match='ForwardingRunner has none'):
    program_window_runner.ProgramWindowRunner(
        training.ForwardingRunner(NoSetter()),
        _program_window(2, 0, 'broadcast'),
    )


def test_runner_must_be_a_round_runner():
  with pytest.raises(ValueError, match='`runner` must be a .*RoundRunner'):
    program_window_runner.ProgramWindowRunner(
        object(), _program_window(2, 0, 'evaluate')
    )


def test_window_must_be_a_program_window(fed_avg_processes):
  with pytest.raises(ValueError, match='ProgramWindow'):
    program_window_runner.ProgramWindowRunner(
        runners.LearningProcessRunner(fed_avg_processes[0.0]), object()
    )


def test_a_process_with_a_window_of_its_own_is_refused():
  process = fed_win.build_fed_win(
      linear_task.model_fn,
      tff.learning.optimizers.build_sgdm(linear_task.CLIENT_LR),
      window_size=2,
  )
  runner = program_window_runner.ProgramWindowRunner(
      runners.LearningProcessRunner(process), _program_window(2, 0, 'evaluate')
  )

  with pytest.raises(ValueError, match='already keeps a window'):
    runner.initialize()


def test_resuming_with_other_window_sizes_fails_before_any_round(
    fed_avg_processes, tmp_path
):
  def runner(extra_sizes):
    return program_window_runner.ProgramWindowRunner(
        runners.LearningProcessRunner(fed_avg_processes[0.0]),
        aggregators.ProgramWindow(
            window_size=2, extra_window_sizes=extra_sizes
        ),
    )

  saved = runner((3, 1)).initialize()
  with pytest.raises(
      program_window_runner.WindowSizesMismatchError, match=r'\[2, 3, 1\]'
  ):
    runner((1, 3)).open_files(str(tmp_path), 4, saved)
