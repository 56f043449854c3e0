"""Tests for the numpy read-out of the window model from a process state.

States are built by hand as numpy values (as a TFF call returns them); the
expected window models are derived in comments from WiMA Eq. 4.
"""

from typing import Any, NamedTuple

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear_task as task
from tff_fedwin import aggregators
from tff_fedwin.aggregators import window_readout
from tff_fedwin.aggregators.window_state import WindowAggregatorState
from tff_fedwin.aggregators.window_state import WindowBuffer


class _State(NamedTuple):
  global_model_weights: Any
  extra: Any


def _weights(values):
  return tff.learning.models.ModelWeights(
      trainable=[np.float32(values)], non_trainable=[np.float32(5.0)]
  )


def _window(*, num_models, window_sum, window_size=3, broadcast=False):
  return WindowBuffer(
      slots=[np.zeros((window_size, len(window_sum)), np.float32)],
      window_sum=[np.float32(window_sum)],
      cursor=np.int32(0),
      num_models=np.int32(num_models),
      window_size=np.int32(window_size),
      read_every=np.int32(1),
      start_round=np.int32(0),
      broadcast=np.bool_(broadcast),
  )


class TestWindowModelWeights:

  def test_absolute_window_gives_the_mean_when_active(self):
    # Finalizer window, W=3 at t=3: m = [6, 9] / 3 = [2, 3].
    state = _State(
        _weights([10.0, 20.0]), (_window(num_models=3, window_sum=[6.0, 9.0]),)
    )
    weights = aggregators.window_model_weights(state)
    np.testing.assert_array_equal(weights.trainable[0], [2.0, 3.0])
    np.testing.assert_array_equal(weights.non_trainable[0], 5.0)

  @pytest.mark.parametrize('num_models,broadcast', [(2, False), (3, True)])
  def test_absolute_window_gives_global_model_otherwise(
      self, num_models, broadcast
  ):
    # t=2 < W: inactive; broadcast mode: the global model already is m^t.
    state = _State(
        _weights([10.0, 20.0]),
        [
            _window(
                num_models=num_models,
                window_sum=[6.0, 9.0],
                broadcast=broadcast,
            )
        ],
    )
    weights = aggregators.window_model_weights(state)
    np.testing.assert_array_equal(weights.trainable[0], [10.0, 20.0])

  def test_aggregator_window_adds_the_offset_to_the_global_model(self):
    # Positions relative to w^0: mean [6, 9] / 3 = [2, 3], position [1, 1]:
    # offset [1, 2]; w^t + offset = [10, 20] + [1, 2] = [11, 22].
    window_state = WindowAggregatorState(
        inner=(),
        window=_window(num_models=4, window_sum=[6.0, 9.0]),
        position=[np.float32([1.0, 1.0])],
    )
    state = _State(_weights([10.0, 20.0]), {'aggregator': window_state})
    weights = aggregators.window_model_weights(state)
    np.testing.assert_array_equal(weights.trainable[0], [11.0, 22.0])
    assert weights.trainable[0].dtype == np.float32
    offset = window_readout.window_offset_numpy(
        window_state.window, window_state.position
    )
    np.testing.assert_array_equal(offset[0], [1.0, 2.0])

  def test_inactive_aggregator_window_has_no_offset(self):
    window = _window(num_models=2, window_sum=[6.0, 9.0])
    assert (
        window_readout.window_offset_numpy(window, [np.float32([1.0, 1.0])])
        is None
    )

  def test_two_windows_raise(self):
    window = _window(num_models=3, window_sum=[6.0, 9.0])
    state = _State(_weights([1.0, 2.0]), (window, window))
    with pytest.raises(ValueError, match='exactly one window'):
      aggregators.window_model_weights(state)

  def test_rejects_tff_state_without_window(self):
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn, tff.learning.optimizers.build_sgdm(task.CLIENT_LR)
    )
    with pytest.raises(ValueError, match='exactly one window'):
      aggregators.window_model_weights(process.initialize())


class TestHoldsWindowAndModelChoice:

  def test_holds_window(self):
    window = _window(num_models=3, window_sum=[6.0, 9.0])
    assert aggregators.holds_window(_State(_weights([1.0, 2.0]), [window]))
    assert aggregators.holds_window(
        _State(_weights([1.0, 2.0]), WindowAggregatorState((), window, []))
    )
    assert not aggregators.holds_window(_State(_weights([1.0, 2.0]), ()))

  def test_window_or_global_model_weights(self):
    # With an active window: m = [2, 3]; without one: the global model.
    with_window = _State(
        _weights([10.0, 20.0]), [_window(num_models=3, window_sum=[6.0, 9.0])]
    )
    np.testing.assert_array_equal(
        aggregators.window_or_global_model_weights(with_window).trainable[0],
        [2.0, 3.0],
    )
    without = _State(_weights([10.0, 20.0]), ())
    assert aggregators.window_or_global_model_weights(without) is (
        without.global_model_weights
    )

  def test_find_window_states_looks_inside_attrs_states(self):
    # TFF's LearningAlgorithmState is an attrs class.
    window = _window(num_models=3, window_sum=[6.0, 9.0])
    state = tff.learning.templates.LearningAlgorithmState(
        global_model_weights=_weights([1.0, 2.0]),
        distributor=(),
        client_work=(),
        aggregator=(),
        finalizer={'window': window},
    )
    assert window_readout.find_window_states(state, WindowBuffer) == [window]
