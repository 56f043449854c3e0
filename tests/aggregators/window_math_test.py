"""Unit tests of tff_fedwin.aggregators.window_math against hand-derived values.

The TF functions run eagerly here on tiny models; every expected value is
derived by hand in a comment from the definitions in docs/design.md sec. 1
(WiMA Eq. 4, IMA Algorithm 1).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators.window_state import WindowBuffer


def _empty(
    model_like, window_size, *, mode='evaluate', start_round=0, read_every=1
):
  return window_math.initial_window(
      model_like,
      window_size=window_size,
      mode=mode,
      start_round=start_round,
      read_every=read_every,
  )


def _numpy_window(
    *,
    num_models,
    window_size,
    start_round=0,
    read_every=1,
    broadcast=False,
    window_sum=None,
):
  """A `WindowBuffer` as a returned state holds it (numpy values)."""
  return WindowBuffer(
      slots=None,
      window_sum=window_sum,
      cursor=np.int32(0),
      num_models=np.int32(num_models),
      window_size=np.int32(window_size),
      read_every=np.int32(read_every),
      start_round=np.int32(start_round),
      broadcast=np.bool_(broadcast),
  )


class TestCheckWindowArgs:

  @pytest.mark.parametrize(
      'kwargs',
      [
          dict(window_size=3, mode='broadcast', start_round=np.int64(2)),
          # The edges: W = 1, start round 0 (the bad cases below are the
          # first values past them); E > 1 is allowed in 'evaluate' mode.
          dict(window_size=1, mode='evaluate', start_round=0),
          dict(
              window_size=np.int32(5),
              mode='evaluate',
              start_round=7,
              read_every=5,
          ),
      ],
  )
  def test_valid_arguments_pass(self, kwargs):
    args = {'read_every': 1, **kwargs}
    assert window_math.check_window_args(**args, prefix='window_') is None
    assert window_math.check_window_args(**args) is None

  @pytest.mark.parametrize(
      'kwargs,pattern',
      [
          (dict(window_size=0), '`window_size` must be an integer >= 1'),
          (dict(window_size=1.0), '`window_size` must be an integer >= 1'),
          (
              dict(start_round=-1),
              '`window_start_round` must be an integer >= 0',
          ),
          (dict(read_every=0), '`window_read_every` must be an integer >= 1'),
          (
              dict(mode='ima'),
              '`window_mode` must be one of evaluate, broadcast',
          ),
          (
              dict(mode='broadcast', read_every=2),
              "`window_read_every` must be 1 with window_mode='broadcast'",
          ),
      ],
  )
  def test_bad_argument_is_named_with_prefix(self, kwargs, pattern):
    args = dict(window_size=3, mode='evaluate', start_round=0, read_every=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=pattern):
      window_math.check_window_args(**args, prefix='window_')

  def test_float_structure_check_names_the_argument(self):
    window_math.check_float_structure(
        tff.to_type([(np.float32, [2]), np.float64]), 'value_type'
    )
    with pytest.raises(TypeError, match='`weights` must be .* floating'):
      window_math.check_float_structure(
          tff.to_type([(np.float32, [2]), np.int32]), 'weights'
      )

  def test_num_slots_is_ceil_of_window_over_read_every(self):
    # Hand values: ceil(5/2) = 3, ceil(6/3) = 2, ceil(3/10) = 1.
    assert window_math.num_slots(5, 2) == 3
    assert window_math.num_slots(6, 3) == 2
    assert window_math.num_slots(3, 10) == 1
    for w in range(1, 12):
      for e in range(1, 12):
        assert window_math.num_slots(w, e) == -(-w // e)


class TestActiveTest:
  # Active iff t >= max(W, start_round) and t % E == 0, by hand:
  # W=3, s=0, E=1: t = 3, 4, ...;  W=3, s=5, E=1: t = 5, 6, ...;
  # W=3, s=5, E=2: t = 6, 8 (t >= 5 and even);  W=4, s=0, E=3: t = 6, 9.
  CASES = [
      (3, 0, 1, {3, 4, 5, 6, 7, 8, 9}),
      (3, 5, 1, {5, 6, 7, 8, 9}),
      (3, 5, 2, {6, 8}),
      (4, 0, 3, {6, 9}),
  ]

  @pytest.mark.parametrize('window_size,start_round,read_every,active', CASES)
  def test_tf_active_test_matches_hand_table(
      self, window_size, start_round, read_every, active
  ):
    window = _empty(
        [tf.zeros([1])],
        window_size,
        start_round=start_round,
        read_every=read_every,
    )
    for t in range(10):
      window = window._replace(num_models=tf.constant(t, tf.int32))
      assert bool(window_math.window_is_active(window)) == (t in active), t

  @pytest.mark.parametrize('window_size,start_round,read_every,active', CASES)
  def test_numpy_active_test_matches_hand_table(
      self, window_size, start_round, read_every, active
  ):
    for t in range(10):
      window = _numpy_window(
          num_models=t,
          window_size=window_size,
          start_round=start_round,
          read_every=read_every,
      )
      assert window_math.window_is_active_numpy(window) == (t in active), t

  def test_numpy_read_out_reads_the_mean_only_in_evaluate_mode(self):
    # Active at t=3 (W=3): evaluate mode reads m^t; broadcast mode's global
    # model already is m^t; inactive at t=2.
    read = window_math.reads_window_mean_numpy
    assert read(_numpy_window(num_models=3, window_size=3))
    assert not read(_numpy_window(num_models=3, window_size=3, broadcast=True))
    assert not read(_numpy_window(num_models=2, window_size=3))


class TestWindowPushAndMean:

  def test_segment_sums_follow_hand_derivation(self):
    # W=3, E=2: K = 2 slots; model w^t = [t] (and [10 t, -t] as a second
    # leaf). A segment starts at push t when (t - 1 + W) % E == 0, i.e. at
    # even t: the cursor moves on and that slot is emptied. Slots, sum after:
    #   t=1: [1, 0] sum 1 (cursor 0)
    #   t=2: advance to 1: [1, 2] sum 1 - 0 + 2 = 3
    #   t=3: [1, 5] sum 6
    #   t=4: advance wraps to 0: [0, 5], sum recomputed = 5; add: [4, 5] sum 9
    #   t=5: [9, 5] sum 14
    #   t=6: advance to 1: [9, 0], sum 14 - 5 = 9; add: [9, 6] sum 15
    # Read rounds (even t >= 3): t=4: 9 = 2+3+4, mean 3; t=6: 15 = 4+5+6,
    # mean 5.
    expected = {
        1: ([1, 0], 1, 0),
        2: ([1, 2], 3, 1),
        3: ([1, 5], 6, 1),
        4: ([4, 5], 9, 0),
        5: ([9, 5], 14, 0),
        6: ([9, 6], 15, 1),
    }
    window = _empty([tf.zeros([1]), tf.zeros([2])], 3, read_every=2)
    assert window.slots[0].shape == (2, 1)
    for t in range(1, 7):
      model = [
          tf.constant([t], tf.float32),
          tf.constant([10.0 * t, -t], tf.float32),
      ]
      window = window_math.window_push(window, model)
      slots, total, cursor = expected[t]
      np.testing.assert_array_equal(window.slots[0][:, 0], slots)
      np.testing.assert_array_equal(
          window.slots[1], [[10.0 * s, -s] for s in slots]
      )
      np.testing.assert_array_equal(window.window_sum[0], [total])
      np.testing.assert_array_equal(
          window.window_sum[1], [10.0 * total, -total]
      )
      assert int(window.cursor) == cursor
      assert int(window.num_models) == t
    np.testing.assert_array_equal(window_math.window_mean(window)[0], [5.0])
    np.testing.assert_array_equal(
        window_math.window_mean(window)[1], [50.0, -5.0]
    )

  def test_numpy_mean_divides_the_sum_by_window_size(self):
    # [3, 6] / 3 = [1, 2].
    window = _numpy_window(
        num_models=3, window_size=3, window_sum=[np.float32([3.0, 6.0])]
    )
    np.testing.assert_array_equal(
        window_math.window_mean_numpy(window)[0], [1.0, 2.0]
    )


class TestServerSteps:

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_window_step_sends_mean_only_in_broadcast_mode(self, mode):
    # W=2: push w^1 = [1, 0] (inactive: sent w^1, distance 0), then
    # w^2 = [3, 4]: active, m^2 = [2, 2]; sent m^2 (broadcast) or w^2;
    # distance ||m^2 - w^2|| = ||[-1, -2]|| = sqrt(5).
    window = _empty([tf.zeros([2])], 2, mode=mode)
    non_trainable = [tf.constant(7.0)]
    weights = tff.learning.models.ModelWeights(
        [tf.constant([1.0, 0.0])], non_trainable
    )
    window, sent, measured = window_math.window_step(window, weights)
    np.testing.assert_array_equal(sent.trainable[0], [1.0, 0.0])
    assert not bool(measured['window_active'])
    assert int(measured['window_fill']) == 1
    assert float(measured['window_distance']) == 0.0
    weights = tff.learning.models.ModelWeights(
        [tf.constant([3.0, 4.0])], non_trainable
    )
    window, sent, measured = window_math.window_step(window, weights)
    want = [2.0, 2.0] if mode == 'broadcast' else [3.0, 4.0]
    np.testing.assert_array_equal(sent.trainable[0], want)
    np.testing.assert_array_equal(sent.non_trainable[0], 7.0)
    assert bool(measured['window_active'])
    assert int(measured['window_fill']) == 2
    np.testing.assert_allclose(
        measured['window_distance'], np.sqrt(5.0), rtol=1e-6
    )

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_delta_window_step_follows_positions(self, mode):
    # W=2, x^0 = [0, 0]. Round 1: a = [1, -2], u^1 = x^0 - a = [-1, 2],
    # inactive: x^1 = u^1 and the emitted result is a itself.
    # Round 2: a = [1, 2], u^2 = [-2, 0]; active, m^2 = [-1.5, 1].
    # Broadcast: x^2 = m^2, result x^1 - x^2 = [0.5, 1]; evaluate: x^2 = u^2,
    # result a. Distance ||m^2 - u^2|| = ||[0.5, 1]|| = sqrt(1.25).
    window = _empty([tf.zeros([2])], 2, mode=mode)
    position = [tf.zeros([2])]
    window, position, result, measured = window_math.delta_window_step(
        window, position, [tf.constant([1.0, -2.0])]
    )
    np.testing.assert_array_equal(position[0], [-1.0, 2.0])
    np.testing.assert_array_equal(result[0], [1.0, -2.0])
    assert not bool(measured['window_active'])
    window, position, result, measured = window_math.delta_window_step(
        window, position, [tf.constant([1.0, 2.0])]
    )
    if mode == 'broadcast':
      np.testing.assert_array_equal(position[0], [-1.5, 1.0])
      np.testing.assert_array_equal(result[0], [0.5, 1.0])
    else:
      np.testing.assert_array_equal(position[0], [-2.0, 0.0])
      np.testing.assert_array_equal(result[0], [1.0, 2.0])
    np.testing.assert_allclose(
        measured['window_distance'], np.sqrt(1.25), rtol=1e-6
    )

  @pytest.mark.parametrize(
      'mode,pushes,want',
      [
          # W=2 after pushing [1] and [3]: m = [2]; the global model is [9].
          ('evaluate', 2, [2.0]),  # active, evaluate: the window mean.
          ('broadcast', 2, [9.0]),  # broadcast: the global model already is m.
          ('evaluate', 1, [9.0]),  # inactive: the global model.
      ],
  )
  def test_evaluated_trainable_chooses_window_or_global(
      self, mode, pushes, want
  ):
    window = _empty([tf.zeros([1])], 2, mode=mode)
    for model in ([1.0], [3.0])[:pushes]:
      window = window_math.window_push(window, [tf.constant(model)])
    chosen = window_math.evaluated_trainable(window, [tf.constant([9.0])])
    np.testing.assert_array_equal(chosen[0], want)
