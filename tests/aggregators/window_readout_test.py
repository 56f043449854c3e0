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


def _slotted_window(*, slots, cursor, num_models, window_size, read_every):
  """A window whose slots are given (one float32 leaf of 2 values)."""
  slots = np.float32(slots)
  return WindowBuffer(
      slots=[slots],
      window_sum=[slots.sum(axis=0)],
      cursor=np.int32(cursor),
      num_models=np.int32(num_models),
      window_size=np.int32(window_size),
      read_every=np.int32(read_every),
      start_round=np.int32(0),
      broadcast=np.bool_(False),
  )


class TestExtraWindowSizes:

  @pytest.mark.parametrize(
      'window_size,read_every,expected',
      [
          # W' <= W with W - W' a multiple of E.
          (4, 1, [1, 2, 3, 4]),
          (7, 3, [1, 4, 7]),
          (6, 2, [2, 4, 6]),
          (3, 10, [3]),
      ],
  )
  def test_readable_window_sizes(self, window_size, read_every, expected):
    window = _slotted_window(
        slots=np.zeros((-(-window_size // read_every), 2)),
        cursor=0,
        num_models=0,
        window_size=window_size,
        read_every=read_every,
    )
    assert window_readout.readable_window_sizes(window) == expected

  @pytest.mark.parametrize('size', [5, 8, 0, True, 4.0])
  def test_unreadable_size_raises_with_the_allowed_sizes(self, size):
    # W = 7, E = 3: 1, 4, 7.
    window = _slotted_window(
        slots=np.zeros((3, 2)),
        cursor=0,
        num_models=9,
        window_size=7,
        read_every=3,
    )
    with pytest.raises(ValueError, match=r'one of 1, 4, 7\.'):
      window_readout.check_readable_window_size(window, size)

  def test_extra_size_is_the_mean_of_the_newest_slots(self):
    # W = 7, E = 3: segments start at rounds t = 1 - W (mod E), i.e. 3, 6, 9;
    # K = 3 slots. Round 9 wrapped the cursor to slot 0, so at the read round
    # t = 9 the slots hold the sums of rounds [9] (slot 0, the cursor),
    # [3-5] (slot 1) and [6-8] (slot 2).
    slots = [[30.0, 60.0], [1.0, 2.0], [10.0, 20.0]]
    window = _slotted_window(
        slots=slots, cursor=0, num_models=9, window_size=7, read_every=3
    )
    state = _State(_weights([0.0, 0.0]), [window])
    # W' = 4 is rounds 6-9, the newest two slots, 0 and (0 - 1) % 3 = 2:
    # (30 + 10) / 4 = 10, (60 + 20) / 4 = 20.
    four = aggregators.window_model_weights(state, window_size=4)
    np.testing.assert_allclose(four.trainable[0], [10.0, 20.0])
    assert four.trainable[0].dtype == np.float32
    # W' = 1 is round 9 alone: slot 0.
    one = aggregators.window_model_weights(state, window_size=1)
    np.testing.assert_allclose(one.trainable[0], [30.0, 60.0])
    # The window's own W = 7: the running sum / 7 = [41, 82] / 7.
    seven = aggregators.window_model_weights(state)
    np.testing.assert_allclose(seven.trainable[0], [41 / 7, 82 / 7], rtol=1e-6)
