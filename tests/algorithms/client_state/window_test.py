"""Tests for `build_scaffold` with a window (WiMA / IMA) vs numpy."""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin import aggregators
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.algorithms import scaffold


@pytest.fixture(scope='module')
def build_process():
  """Builds each process configuration once per module."""
  return sref.process_builder()


# (W, start_round): active from max(W, start_round), i.e. from round W, or
# from round W + 1 (start_round after W).
WINDOW_CASES = [
    (window_size, start_round, mode)
    for window_size, start_round in ((2, 0), (2, 3), (3, 0), (3, 4))
    for mode in ('evaluate', 'broadcast')
]


class TestBuildScaffoldWindowComputation:

  def test_window_metrics_type(self, build_process):
    process = build_process(window_size=2, window_mode='broadcast')

    tff.test.assert_types_identical(
        process.next.type_signature.result[2],
        tff.FederatedType(
            tff.to_type(
                collections.OrderedDict(
                    train_loss=np.float32,
                    num_examples=np.int64,
                    num_clients_with_data=np.int32,
                    window=collections.OrderedDict(
                        window_fill=np.int32,
                        window_active=np.bool_,
                        window_distance=np.float32,
                    ),
                )
            ),
            tff.SERVER,
        ),
    )


class TestBuildScaffoldWindowExecution:

  @pytest.mark.parametrize('window_size, start_round, mode', WINDOW_CASES)
  def test_window_rounds_match_numpy(
      self, build_process, window_size, start_round, mode
  ):
    process = build_process(
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
    )
    rounds = 2 * window_size + 2
    expected = sref.np_simulate(
        rounds, window_size=window_size, mode=mode, start_round=start_round
    )

    for t, state, store, _ in sref.run_rounds(process, rounds):
      sref.assert_round_matches(
          t, state, store, expected[t - 1], with_window=True, process=process
      )

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_window_measurements_match_numpy(self, build_process, mode):
    window_size, start_round = 2, 3
    process = build_process(
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
    )
    rounds = 5
    expected = sref.np_simulate(
        rounds, window_size=window_size, mode=mode, start_round=start_round
    )

    for t, _, _, metrics in sref.run_rounds(process, rounds):
      measured = metrics['window']
      assert measured['window_fill'] == expected[t - 1].window_fill, t
      assert bool(measured['window_active']) == expected[t - 1].window_active, t
      np.testing.assert_allclose(
          measured['window_distance'],
          expected[t - 1].window_distance,
          atol=sref.ATOL,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          metrics['train_loss'],
          expected[t - 1].train_loss,
          rtol=1e-5,
          err_msg=f'round {t}',
      )

  def test_initial_window_is_empty_and_model_is_initial(self, build_process):
    state = build_process(window_size=2, window_mode='evaluate').initialize()

    assert isinstance(state.window, aggregators.WindowBuffer)
    assert state.window.num_models == 0
    assert state.window.window_size == 2
    sref.assert_close(
        scaffold.model_weights_to_evaluate(state).trainable,
        sref.np_initial_params(),
    )
    sref.assert_close(
        window_model_weights(state).trainable, sref.np_initial_params()
    )

  def test_wsm_with_broadcast_window_matches_numpy(self, build_process):
    window_size, start_round = 2, 3
    process = build_process(
        client_loss='wsm',
        num_classes=sref.NUM_CLASSES,
        window_size=window_size,
        window_mode='broadcast',
        window_start_round=start_round,
    )
    rounds = 2 * window_size + 2
    expected = sref.np_simulate(
        rounds,
        client_loss='wsm',
        window_size=window_size,
        mode='broadcast',
        start_round=start_round,
    )

    for t, state, store, metrics in sref.run_rounds(process, rounds):
      sref.assert_round_matches(
          t, state, store, expected[t - 1], with_window=True, process=process
      )
      np.testing.assert_allclose(
          metrics['train_loss'],
          expected[t - 1].train_loss,
          rtol=1e-5,
          err_msg=f'round {t}',
      )
