"""Tests for build_window_finalizer: the window after the server optimizer.

Expected values are derived by hand in comments (server SGD, WiMA Eq. 4,
IMA Algorithm 1).
"""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear_task as task
from tff_fedwin import aggregators
from tff_fedwin.aggregators.window_finalizer import build_window_finalizer
from tff_fedwin.aggregators.window_finalizer import WindowFinalizerState
from tff_fedwin.aggregators.window_state import WindowBuffer

WEIGHTS_TYPE = tff.learning.models.weights_type_from_model(task.model_fn)


def _finalizer(mode='evaluate', window_size=2, **kwargs):
  return build_window_finalizer(
      tff.learning.optimizers.build_sgdm(learning_rate=0.5),
      WEIGHTS_TYPE,
      window_size=window_size,
      mode=mode,
      **kwargs,
  )


def _window_type(num_slots):
  return tff.to_type(
      WindowBuffer(
          slots=[(np.float32, [num_slots, 3, 1])],
          window_sum=[(np.float32, [3, 1])],
          cursor=np.int32,
          num_models=np.int32,
          window_size=np.int32,
          read_every=np.int32,
          start_round=np.int32,
          broadcast=np.bool_,
      )
  )


class TestBuildWindowFinalizerComputation:

  @pytest.mark.parametrize(
      'window_size,read_every,num_slots', [(2, 1, 2), (5, 2, 3)]
  )
  def test_type_signature(self, window_size, read_every, num_slots):
    finalizer = _finalizer(window_size=window_size, read_every=read_every)
    state_type = tff.FederatedType(
        tff.to_type(
            WindowFinalizerState(
                optimizer=collections.OrderedDict(learning_rate=np.float32),
                window=_window_type(num_slots),
            )
        ),
        tff.SERVER,
    )
    tff.test.assert_types_identical(
        finalizer.initialize.type_signature, tff.FunctionType(None, state_type)
    )
    measurements_type = tff.FederatedType(
        tff.to_type(
            collections.OrderedDict(
                optimizer=collections.OrderedDict(update_non_finite=np.int32),
                window=collections.OrderedDict(
                    window_fill=np.int32,
                    window_active=np.bool_,
                    window_distance=np.float32,
                ),
            )
        ),
        tff.SERVER,
    )
    next_type = finalizer.next.type_signature
    tff.test.assert_types_identical(next_type.parameter[0], state_type)
    tff.test.assert_types_identical(
        next_type.parameter[1], tff.FederatedType(WEIGHTS_TYPE, tff.SERVER)
    )
    tff.test.assert_types_identical(next_type.result.state, state_type)
    tff.test.assert_types_identical(
        next_type.result.result, tff.FederatedType(WEIGHTS_TYPE, tff.SERVER)
    )
    tff.test.assert_types_identical(
        next_type.result.measurements, measurements_type
    )

  def test_window_runs_on_the_server_only(self):
    # The finalizer aggregates nothing across clients, securely or not.
    finalizer = _finalizer()
    tff.test.assert_not_contains_unsecure_aggregation(finalizer.next)
    tff.test.assert_not_contains_secure_aggregation(finalizer.next)


class TestBuildWindowFinalizerExecution:

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_window_holds_post_optimizer_models(self, mode):
    # Server SGD(0.5), W=2. Round 1: x^0 = [1, 2, 3], update [2, 0, -2]:
    # w^1 = x^0 - 0.5 * update = [0, 2, 4]; inactive, result w^1.
    # Round 2 from w^1, update [0, 4, 2]: w^2 = [0, 0, 3]; active,
    # m^2 = ([0, 2, 4] + [0, 0, 3]) / 2 = [0, 1, 3.5]. Result: m^2 in
    # broadcast mode, w^2 in evaluate mode; distance ||m^2 - w^2|| =
    # ||[0, 1, 0.5]|| = sqrt(1.25).
    finalizer = _finalizer(mode)
    state = finalizer.initialize()
    weights = tff.learning.models.ModelWeights(
        [np.float32([[1.0], [2.0], [3.0]])], []
    )
    output = finalizer.next(
        state, weights, [np.float32([[2.0], [0.0], [-2.0]])]
    )
    np.testing.assert_array_equal(
        output.result.trainable[0], [[0.0], [2.0], [4.0]]
    )
    assert not output.measurements['window']['window_active']
    output = finalizer.next(
        output.state, output.result, [np.float32([[0.0], [4.0], [2.0]])]
    )
    want = (
        [[0.0], [1.0], [3.5]] if mode == 'broadcast' else [[0.0], [0.0], [3.0]]
    )
    np.testing.assert_array_equal(output.result.trainable[0], want)
    measured = output.measurements['window']
    assert measured['window_active']
    assert measured['window_fill'] == 2
    np.testing.assert_allclose(
        measured['window_distance'], np.sqrt(1.25), rtol=1e-6
    )
    # The window holds w^1 + w^2 = [0, 2, 7] in both modes.
    np.testing.assert_array_equal(
        output.state.window.window_sum[0], [[0.0], [2.0], [7.0]]
    )
    assert output.measurements['optimizer']['update_non_finite'] == 0


class TestBuildWindowFinalizerArguments:

  @pytest.mark.parametrize(
      'kwargs,pattern',
      [
          (dict(window_size=0), '`window_size` must be an integer >= 1'),
          (dict(mode='average'), '`mode` must be one of evaluate, broadcast'),
          (dict(mode='broadcast', read_every=3), '`read_every` must be 1'),
      ],
  )
  def test_bad_window_arguments(self, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
      _finalizer(**kwargs)


class TestComposedProcessWithWindow:
  """docs/design.md, "Your own process with the window", at tiny size."""

  def test_window_model_is_the_mean_of_the_round_models(self):
    @tff.tensorflow.computation
    def initial_model_weights_fn():
      return tff.learning.models.ModelWeights.from_model(task.model_fn())

    process = tff.learning.templates.compose_learning_process(
        initial_model_weights_fn,
        tff.learning.templates.build_broadcast_process(WEIGHTS_TYPE),
        tff.learning.templates.build_model_delta_client_work(
            task.model_fn,
            tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
            tff.learning.ClientWeighting.NUM_EXAMPLES,
        ),
        tff.aggregators.MeanFactory().create(
            WEIGHTS_TYPE.trainable, tff.TensorType(np.float32)
        ),
        aggregators.build_window_finalizer(
            tff.learning.optimizers.build_adam(0.01),
            WEIGHTS_TYPE,
            window_size=2,
        ),
    )
    state = process.initialize()
    round_models = []
    for _ in range(2):  # Two clients a round.
      state = process.next(state, task.client_datasets()[:2]).state
      round_models.append(task.kernel(state.global_model_weights))
    assert isinstance(state.finalizer, aggregators.WindowFinalizerState)
    assert not np.allclose(round_models[0], round_models[1])
    # W = 2, round 2: m^2 = (w^1 + w^2) / 2 of the post-Adam models.
    np.testing.assert_allclose(
        task.kernel(aggregators.window_model_weights(state)),
        np.mean(round_models, axis=0),
        rtol=1e-6,
    )
    # TFF's composed `get_model_weights` stays the global model w^2.
    np.testing.assert_array_equal(
        task.kernel(process.get_model_weights(state)), round_models[1]
    )
