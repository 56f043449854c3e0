"""Tests for tff_fedwin.algorithms.fed_win_fork: a trunk's state as a target's.

States are built here as numpy structures shaped like `build_fed_win`'s
(`LearningAlgorithmState` with a `WindowFinalizerState` finalizer), with a
one-tensor model. The W = 1 window is checked against the window a W = 1 run
holds: `window_math.window_push` of the models of rounds 1..k.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators.window_finalizer import WindowFinalizerState
from tff_fedwin.aggregators.window_state import WindowBuffer
from tff_fedwin.algorithms import fed_win_fork

K = 3
# Models of rounds 1..3; round 3's has a -0.0, which a window slot holds as
# +0.0 (0.0 + -0.0 = +0.0 in IEEE arithmetic).
MODELS = [
    np.array([0.5, -1.25], np.float32),
    np.array([2.0, 0.75], np.float32),
    np.array([-0.0, 3.5], np.float32),
]
OPTIMIZER_STATE = {'step': np.int64(K), 'm': np.array([0.1, 0.2], np.float32)}


def _window(window_size, start_round, models=MODELS):
  """A 'broadcast' `WindowBuffer` after `window_push` of `models` (numpy)."""
  window = window_math.initial_window(
      [tf.zeros([2])],
      window_size=window_size,
      mode='broadcast',
      start_round=start_round,
      read_every=1,
  )
  for model in models:
    window = window_math.window_push(window, [tf.constant(model)])
  return tf.nest.map_structure(lambda t: t.numpy(), window)


def _empty_window(window_size, start_round):
  return _window(window_size, start_round, models=())


def _state(finalizer):
  return tff.learning.templates.LearningAlgorithmState(
      global_model_weights=tff.learning.models.ModelWeights([MODELS[-1]], []),
      distributor=(),
      client_work={'round_num': np.int32(K)},
      aggregator=(),
      finalizer=finalizer,
  )


def _trunk(window_size=5, start_round=10):
  return _state(
      WindowFinalizerState(OPTIMIZER_STATE, _window(window_size, start_round))
  )


def _assert_bits_equal(got, want):
  tf.nest.assert_same_structure(got, want)
  for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
    np.testing.assert_array_equal(a, b, strict=True)
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


def test_no_window_target_gets_the_optimizer_state_only():
  target = _state(OPTIMIZER_STATE)
  forked = fed_win_fork.forked_state(_trunk(), target, K)
  _assert_bits_equal(forked.finalizer, OPTIMIZER_STATE)
  _assert_bits_equal(forked.global_model_weights.trainable, [MODELS[-1]])
  _assert_bits_equal(forked.client_work, {'round_num': np.int32(K)})


def test_one_model_window_is_the_window_of_a_w1_run():
  target = _state(WindowFinalizerState(OPTIMIZER_STATE, _empty_window(1, 10)))
  forked = fed_win_fork.forked_state(_trunk(), target, K)
  # A W = 1 run's window after rounds 1..3: one slot with w^3 (+0.0 for
  # its -0.0), sum w^3, cursor 0, 3 models.
  _assert_bits_equal(forked.finalizer.window, _window(1, 10))
  np.testing.assert_array_equal(
      forked.finalizer.window.slots[0],
      np.array([[0.0, 3.5]], np.float32),
      strict=True,
  )
  assert not np.signbit(forked.finalizer.window.slots[0][0, 0])
  _assert_bits_equal(forked.finalizer.optimizer, OPTIMIZER_STATE)


def test_same_layout_target_keeps_the_slots_with_its_start_round():
  target = _state(WindowFinalizerState(OPTIMIZER_STATE, _empty_window(5, 4)))
  forked = fed_win_fork.forked_state(_trunk(), target, K)
  # The window a run starting at round 4 holds after rounds 1..3.
  _assert_bits_equal(forked.finalizer.window, _window(5, 4))


@pytest.mark.parametrize(
    'trunk, target_window, pattern',
    [
        # The trunk's W = 2 window is active from round max(2, 0) = 2 <= 3.
        (
            dict(window_size=2, start_round=0),
            (1, 10),
            'trunk window .* from round 2',
        ),
        # The target's window (W = 1 from round 3) acts from max(1, 3) = 3 = k.
        (dict(), (1, 3), 'target window .* from round 3'),
        (dict(), (3, 10), r'W and E of the trunk \(5, 1\) or W = E = 1'),
    ],
)
def test_bad_fork_is_refused(trunk, target_window, pattern):
  target = _state(
      WindowFinalizerState(OPTIMIZER_STATE, _empty_window(*target_window))
  )
  with pytest.raises(ValueError, match=pattern):
    fed_win_fork.forked_state(_trunk(**trunk), target, K)


def test_trunk_without_window_is_refused():
  with pytest.raises(ValueError, match='no window finalizer'):
    fed_win_fork.forked_state(
        _state(OPTIMIZER_STATE), _state(OPTIMIZER_STATE), K
    )


def test_target_of_another_model_is_refused():
  target = _state(OPTIMIZER_STATE)._replace(
      global_model_weights=tff.learning.models.ModelWeights(
          [np.zeros(3, np.float32)], []
      )
  )
  with pytest.raises(ValueError, match=r'float32\[2\] where .* float32\[3\]'):
    fed_win_fork.forked_state(_trunk(), target, K)


TRUNK_ROW = {
    'round_num': '3',
    'train/client_work/train/loss': '0.25',
    'train/finalizer/optimizer/update_non_finite': '0',
    'train/finalizer/window/window_active': '0',
    'train/finalizer/window/window_fill': '3',
}


@pytest.mark.parametrize(
    'target_window_size, expected',
    [
        (
            None,
            {
                'round_num': '3',
                'train/client_work/train/loss': '0.25',
                'train/finalizer/update_non_finite': '0',
            },
        ),
        # window_fill = min(t, W) = min(3, 1).
        (1, dict(TRUNK_ROW, **{'train/finalizer/window/window_fill': '1'})),
        (5, TRUNK_ROW),
    ],
)
def test_metrics_row_is_the_targets(target_window_size, expected):
  assert fed_win_fork.forked_metrics_row(TRUNK_ROW, target_window_size) == (
      expected
  )
