"""Tests for tff_fedwin.algorithms.fed_win against independent numpy FedAvg.

The numpy side (tests/numpy_reference.py) implements FedAvg, the window mean
(WiMA Eq. 4), its decayed-update form (Eq. 6/7) and IMA's broadcast from the
papers; nothing here calls the window code to produce an expected value.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear_task as task
from tests import numpy_reference as ref
from tests.linear_task import CLIENT_LR, INPUT_DIM
from tests.linear_task import client_datasets, kernel as _kernel, model_fn
from tests.linear_task import simulate as _simulate
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.algorithms import fed_win

_ITERATOR = tff.learning.LoopImplementation.DATASET_ITERATOR  # The default.
WINDOW_GRID = [
    (w, start, mode, _ITERATOR)
    for w in (1, 3, 5)
    for start in (0, w + 2)
    for mode in ('evaluate', 'broadcast')
] + [(3, 0, 'evaluate', tff.learning.LoopImplementation.DATASET_REDUCE)]


class TestBuildFedWinExecution:

  @pytest.mark.parametrize(
      'window_size,start_round,mode,loop_implementation', WINDOW_GRID
  )
  def test_window_model_matches_numpy_eq4_and_eq6_every_round(
      self, window_size, start_round, mode, loop_implementation
  ):
    rounds = 2 * window_size + 3
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
        loop_implementation=loop_implementation,
    )
    expected = _simulate(window_size, mode, start_round, rounds)
    data = client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      # Window model, from the TFF computation and from the numpy reader.
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          _kernel(window_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      if expected['active'][t]:
        np.testing.assert_allclose(
            _kernel(process.get_model_weights(state)),
            ref.window_mean_eq6(expected['aggregated'], t, window_size),
            atol=1e-5,
            err_msg=f'round {t} (Eq. 6)',
        )
      # The model the clients receive next round: m^t in broadcast mode once
      # active, w^t otherwise.
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize(
      'window_size,mode,start_round',
      [(1, 'evaluate', 0), (1, 'broadcast', 0), (3, 'broadcast', 100)],
  )
  def test_inactive_or_unit_window_reproduces_tff_fedavg(
      self, window_size, mode, start_round
  ):
    rounds = 6
    ours = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
    )
    theirs = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR)
    )
    data = client_datasets()
    our_state, their_state = ours.initialize(), theirs.initialize()
    for t in range(1, rounds + 1):
      our_state = ours.next(our_state, data).state
      their_state = theirs.next(their_state, data).state
      np.testing.assert_allclose(
          _kernel(ours.get_model_weights(our_state)),
          _kernel(theirs.get_model_weights(their_state)),
          atol=1e-6,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_window_holds_post_momentum_models(self, mode):
    # FedAvgM: the window holds the models after the server momentum step, and
    # the momentum accumulator is neither averaged nor reset
    # (docs/design.md sec. 1).
    window_size, start_round, rounds = 3, 4, 8
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        tff.learning.optimizers.build_sgdm(learning_rate=0.7, momentum=0.9),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
    )
    expected = _simulate(
        window_size,
        mode,
        start_round,
        rounds,
        server_learning_rate=0.7,
        server_momentum=0.9,
    )
    data = client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize(
      'server_optimizer',
      [
          tff.learning.optimizers.build_adam(0.05),
          tff.learning.optimizers.build_yogi(0.05),
      ],
      ids=['adam', 'yogi'],
  )
  def test_evaluate_window_is_mean_of_observed_global_models(
      self, server_optimizer
  ):
    # Adaptive server optimizers: in evaluate mode the trajectory is the plain
    # one, so the window model must be the mean of the last W global models
    # observed in the states (WiMA Eq. 7 with any server optimizer).
    window_size, rounds = 3, 6
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        server_optimizer,
        window_size=window_size,
    )
    data = client_datasets()
    state = process.initialize()
    observed = [_kernel(state.global_model_weights)]
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      observed.append(_kernel(state.global_model_weights))
      expected = (
          np.mean(observed[t - window_size + 1 :], axis=0)
          if t >= window_size
          else observed[t]
      )
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected,
          atol=1e-6,
          err_msg=f'round {t}',
      )

  def test_window_measurements_report_fill_activity_and_distance(self):
    window_size, start_round, rounds = 3, 4, 6
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_start_round=start_round,
    )
    expected = _simulate(window_size, 'evaluate', start_round, rounds)
    data = client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      output = process.next(state, data)
      state = output.state
      measured = output.metrics['finalizer']['window']
      assert measured['window_fill'] == min(t, window_size)
      assert bool(measured['window_active']) == (
          t >= max(window_size, start_round)
      )
      distance = np.linalg.norm(
          expected['window'][t] - expected['aggregated'][t]
      )
      np.testing.assert_allclose(
          measured['window_distance'], distance, atol=1e-5
      )

  def test_read_every_keeps_ceil_w_over_e_slots_and_is_exact_at_read_rounds(
      self,
  ):
    # W=5, E=2: K = ceil(5/2) = 3 slots; the window model is m^t at even t >= 5
    # and the global model otherwise.
    window_size, read_every, rounds = 5, 2, 10
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_read_every=read_every,
    )
    expected = _simulate(window_size, 'evaluate', 0, rounds)
    data = client_datasets()
    state = process.initialize()
    assert state.finalizer.window.slots[0].shape == (3, INPUT_DIM, 1)
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      want = (
          expected['window'][t]
          if t >= window_size and t % read_every == 0
          else expected['aggregated'][t]
      )
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          want,
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_wsm_client_loss_with_window_matches_numpy(self, mode):
    # FedAvg whose clients train on the WSM loss (beta from their own data),
    # with the window in both modes, against numpy (WSM Eq. 4 gradient).
    window_size, start_round, rounds = 2, 3, 6
    process = fed_win.build_fed_win(
        task.softmax_model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
        client_loss='wsm',
        num_classes=task.NUM_CLASSES,
    )
    expected = ref.simulate(
        task.SOFTMAX_W0,
        task.softmax_numpy_batches(),
        rounds=rounds,
        client_learning_rate=CLIENT_LR,
        window_size=window_size,
        mode=mode,
        start_round=start_round,
        client_update=ref.linear_wsm_client_update,
    )
    data = task.softmax_client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
