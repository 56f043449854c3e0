"""Tests for WindowedModelAveragingFactory and its read-out.

Expected values come from numpy written here or in tests/numpy_reference.py
from WiMA Eq. 4/6 and IMA Algorithm 1, never from the code under test.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear_task as task
from tests import numpy_reference as ref
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.aggregators import WindowAggregatorState
from tff_fedwin.aggregators import WindowBuffer
from tff_fedwin.aggregators import WindowedModelAveragingFactory
from tff_fedwin.aggregators.window_readout import window_offset_numpy

VALUE_TYPE = tff.to_type([(np.float32, [2]), (np.float32, [3])])
WEIGHT_TYPE = tff.TensorType(np.float32)


def _client_values(t, num_clients=3):
  """Deterministic client deltas and weights for round t (1-based)."""
  rng = np.random.default_rng(100 + t)
  values = [
      [
          rng.normal(size=2).astype(np.float32),
          rng.normal(size=3).astype(np.float32),
      ]
      for _ in range(num_clients)
  ]
  weights = [float(w) for w in rng.integers(1, 5, size=num_clients)]
  return values, weights


def _weighted_mean(values, weights):
  return [
      sum(w * v[i] for v, w in zip(values, weights)) / sum(weights)
      for i in range(2)
  ]


def _flat(structure):
  return np.concatenate(
      [np.ravel(np.asarray(x, np.float64)) for x in tf.nest.flatten(structure)]
  )


def _state_type(inner_process, num_slots):
  return tff.FederatedType(
      tff.to_type(
          WindowAggregatorState(
              inner=inner_process.initialize.type_signature.result.member,
              window=WindowBuffer(
                  slots=[
                      (np.float32, [num_slots, 2]),
                      (np.float32, [num_slots, 3]),
                  ],
                  window_sum=[(np.float32, [2]), (np.float32, [3])],
                  cursor=np.int32,
                  num_models=np.int32,
                  window_size=np.int32,
                  read_every=np.int32,
                  start_round=np.int32,
                  broadcast=np.bool_,
              ),
              position=[(np.float32, [2]), (np.float32, [3])],
          )
      ),
      tff.SERVER,
  )


class TestWindowedModelAveragingFactoryComputation:

  @pytest.mark.parametrize('weighted', [True, False])
  def test_type_signature_places_state_on_server(self, weighted):
    factory = WindowedModelAveragingFactory(4)
    process = (
        factory.create(VALUE_TYPE, WEIGHT_TYPE)
        if weighted
        else factory.create(VALUE_TYPE)
    )
    assert isinstance(process, tff.templates.AggregationProcess)
    state_type = process.initialize.type_signature.result
    assert state_type.placement is tff.SERVER
    # Window slots: K = W = 4 copies of each tensor, the running sum and the
    # position: one copy each.
    assert state_type.member.window.slots[0].shape == (4, 2)
    assert state_type.member.window.window_sum[1].shape == (3,)
    result_type = process.next.type_signature.result
    assert result_type.result.placement is tff.SERVER
    assert result_type.result.member.is_equivalent_to(VALUE_TYPE)
    assert list(process.next.type_signature.parameter[1].member) == list(
        VALUE_TYPE
    )
    assert len(process.next.type_signature.parameter) == (3 if weighted else 2)

  @pytest.mark.parametrize('weighted', [True, False])
  @pytest.mark.parametrize(
      'window_size,read_every,num_slots', [(4, 1, 4), (5, 2, 3)]
  )
  def test_type_signatures_are_identical_to_hand_built(
      self, weighted, window_size, read_every, num_slots
  ):
    # The inner process is TFF's own mean; the window adds its buffer and
    # the position to the state and window measurements.
    factory = WindowedModelAveragingFactory(window_size, read_every=read_every)
    if weighted:
      process = factory.create(VALUE_TYPE, WEIGHT_TYPE)
      inner = tff.aggregators.MeanFactory().create(VALUE_TYPE, WEIGHT_TYPE)
    else:
      process = factory.create(VALUE_TYPE)
      inner = tff.aggregators.UnweightedMeanFactory().create(VALUE_TYPE)
    state_type = _state_type(inner, num_slots)
    tff.test.assert_types_identical(
        process.initialize.type_signature, tff.FunctionType(None, state_type)
    )
    parameter = [
        ('state', state_type),
        ('value', tff.FederatedType(VALUE_TYPE, tff.CLIENTS)),
    ]
    if weighted:
      parameter.append(('weight', tff.FederatedType(WEIGHT_TYPE, tff.CLIENTS)))
    measurements = collections.OrderedDict(
        inner=inner.next.type_signature.result.measurements.member,
        window=collections.OrderedDict(
            window_fill=np.int32,
            window_active=np.bool_,
            window_distance=np.float32,
        ),
    )
    expected_next = tff.FunctionType(
        parameter=tff.StructWithPythonType(parameter, collections.OrderedDict),
        result=tff.templates.MeasuredProcessOutput(
            state=state_type,
            result=tff.FederatedType(VALUE_TYPE, tff.SERVER),
            measurements=tff.FederatedType(
                tff.to_type(measurements), tff.SERVER
            ),
        ),
    )
    tff.test.assert_types_identical(process.next.type_signature, expected_next)

  def test_window_adds_no_aggregation_of_its_own(self):
    # With a secure inner sum, the composed process aggregates only through
    # it: the window step runs on the server.
    inner = tff.aggregators.UnweightedMeanFactory(
        value_sum_factory=tff.aggregators.SecureSumFactory(
            upper_bound_threshold=1.0, lower_bound_threshold=-1.0
        ),
        count_sum_factory=tff.aggregators.SecureSumFactory(
            upper_bound_threshold=1
        ),
    )
    process = WindowedModelAveragingFactory(3, inner_factory=inner).create(
        VALUE_TYPE
    )
    tff.test.assert_not_contains_unsecure_aggregation(process.next)
    tff.test.assert_contains_secure_aggregation(process.next)


GRID = [
    (w, start, mode)
    for w in (1, 3, 5)
    for start in (0, w + 2)
    for mode in ('evaluate', 'broadcast')
]


class _SumPlusOneFactory(tff.aggregators.WeightedAggregationFactory):
  """Weighted 'aggregation' that returns sum(values) + 1: proves delegation."""

  def create(self, value_type, weight_type):

    @tff.federated_computation()
    def init_fn():
      return tff.federated_value((), tff.SERVER)

    @tff.tensorflow.computation(value_type)
    def plus_one(value):
      return tf.nest.map_structure(lambda v: v + 1.0, value)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      del weight
      return tff.templates.MeasuredProcessOutput(
          state,
          tff.federated_map(plus_one, tff.federated_sum(value)),
          tff.federated_value((), tff.SERVER),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)


def _run(process, rounds, with_window=True):
  state = process.initialize()
  data = task.client_datasets()
  observed = [task.kernel(state.global_model_weights)]
  window_models = [observed[0]]
  for _ in range(rounds):
    state = process.next(state, data).state
    observed.append(task.kernel(state.global_model_weights))
    if with_window:
      window_models.append(task.kernel(window_model_weights(state)))
  return observed, window_models


def _other_builders():
  client_opt = tff.learning.optimizers.build_sgdm(task.CLIENT_LR)
  return {
      'unweighted_fed_avg': lambda agg: (
          tff.learning.algorithms.build_unweighted_fed_avg(
              task.model_fn, client_opt, model_aggregator=agg
          )
      ),
      'weighted_fed_prox': lambda agg: (
          tff.learning.algorithms.build_weighted_fed_prox(
              task.model_fn,
              proximal_strength=0.5,
              client_optimizer_fn=client_opt,
              model_aggregator=agg,
          )
      ),
      'weighted_mime_lite': lambda agg: (
          tff.learning.algorithms.build_weighted_mime_lite(
              task.model_fn,
              base_optimizer=tff.learning.optimizers.build_sgdm(
                  task.CLIENT_LR, momentum=0.5
              ),
              model_aggregator=agg,
          )
      ),
      'fed_avg_with_optimizer_schedule': lambda agg: (
          tff.learning.algorithms.build_weighted_fed_avg_with_optimizer_schedule(
              task.model_fn,
              client_learning_rate_fn=lambda r: task.CLIENT_LR
              / (1.0 + tf.cast(r, tf.float32)),
              client_optimizer_fn=lambda lr: tff.learning.optimizers.build_sgdm(
                  lr
              ),
              model_aggregator=agg,
          )
      ),
  }


class TestWindowedModelAveragingFactoryExecution:

  @pytest.mark.parametrize('window_size,start_round,mode', GRID)
  def test_aggregation_process_tracks_window_of_models(
      self, window_size, start_round, mode
  ):
    # The factory sees deltas a_t; with server SGD(1.0) the aggregated model is
    # u^t = x^{t-1} - a_t and the clients next start from x^t = m^t (broadcast,
    # active) or u^t. Models are positions relative to w^0 = 0 here.
    process = WindowedModelAveragingFactory(
        window_size, mode=mode, start_round=start_round
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    state = process.initialize()
    x = np.zeros(5)
    aggregated = [np.zeros(5)]
    for t in range(1, 2 * window_size + 4):
      values, weights = _client_values(t)
      output = process.next(state, values, weights)
      state = output.state
      mean_delta = _flat(_weighted_mean(values, weights))
      u = x - mean_delta
      aggregated.append(u)
      active = t >= max(window_size, start_round)
      m = ref.window_mean_eq4(aggregated, t, window_size) if active else u
      new_x = m if (mode == 'broadcast' and active) else u
      # Emitted aggregate: x^{t-1} - x^t.
      np.testing.assert_allclose(
          _flat(output.result), x - new_x, atol=1e-5, err_msg=f'round {t}'
      )
      if mode == 'evaluate':
        # Window offset m^t - w^t, as window_model_weights adds it.
        offset = window_offset_numpy(state.window, state.position)
        if active:
          np.testing.assert_allclose(_flat(offset), m - u, atol=1e-5)
          np.testing.assert_allclose(
              _flat(offset) + u,
              ref.window_mean_eq6(aggregated, t, window_size),
              atol=1e-5,
          )
        else:
          assert offset is None
      measured = output.measurements['window']
      assert measured['window_fill'] == min(t, window_size)
      assert bool(measured['window_active']) == active
      np.testing.assert_allclose(
          measured['window_distance'], np.linalg.norm(m - u), atol=1e-5
      )
      x = new_x

  @pytest.mark.parametrize(
      'window_size,read_every', [(5, 2), (6, 3), (7, 3), (3, 10), (10, 10)]
  )
  def test_read_every_is_exact_at_read_rounds_with_ceil_slots(
      self, window_size, read_every
  ):
    process = WindowedModelAveragingFactory(
        window_size, read_every=read_every
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    state = process.initialize()
    assert state.window.slots[0].shape[0] == -(-window_size // read_every)
    aggregated = [np.zeros(5)]
    for t in range(1, 3 * max(window_size, read_every) + 2):
      values, weights = _client_values(t)
      state = process.next(state, values, weights).state
      aggregated.append(aggregated[-1] - _flat(_weighted_mean(values, weights)))
      offset = window_offset_numpy(state.window, state.position)
      if t >= window_size and t % read_every == 0:
        np.testing.assert_allclose(
            _flat(offset),
            ref.window_mean_eq4(aggregated, t, window_size) - aggregated[t],
            atol=1e-5,
            err_msg=f'round {t}',
        )
      else:
        assert offset is None, f'round {t}'

  def test_named_constructors_set_mode_and_start_round(self):
    # WiMA: evaluate mode from round W (paper W = 100); IMA: broadcast mode,
    # window P = 5 by default, from the given start round.
    wima = (
        WindowedModelAveragingFactory.wima()
        .create(VALUE_TYPE, WEIGHT_TYPE)
        .initialize()
        .window
    )
    assert (int(wima.window_size), int(wima.start_round)) == (100, 0)
    assert not wima.broadcast
    ima = (
        WindowedModelAveragingFactory.ima(start_round=7)
        .create(VALUE_TYPE, WEIGHT_TYPE)
        .initialize()
        .window
    )
    assert (int(ima.window_size), int(ima.start_round)) == (5, 7)
    assert ima.broadcast

  def test_unweighted_inner_factory_gives_unweighted_mean(self):
    process = WindowedModelAveragingFactory(
        2, inner_factory=tff.aggregators.UnweightedMeanFactory()
    ).create(VALUE_TYPE)
    state = process.initialize()
    values, _ = _client_values(1)
    output = process.next(state, values)
    np.testing.assert_allclose(
        _flat(output.result),
        _flat(_weighted_mean(values, [1.0, 1.0, 1.0])),
        atol=1e-6,
    )

  def test_inner_factory_is_used(self):
    process = WindowedModelAveragingFactory(
        2, inner_factory=_SumPlusOneFactory()
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    values, weights = _client_values(1)
    output = process.next(process.initialize(), values, weights)
    expected = [sum(v[i] for v in values) + 1.0 for i in range(2)]
    np.testing.assert_allclose(_flat(output.result), _flat(expected), atol=1e-5)


class TestWindowedModelAveragingFactoryInTffBuilders:
  """Composition with TFF's learning builders, read by window_model_weights."""

  @pytest.mark.parametrize(
      'mode,start_round',
      [('evaluate', 0), ('evaluate', 5), ('broadcast', 0), ('broadcast', 5)],
  )
  def test_in_tff_weighted_fed_avg_window_is_exact(self, mode, start_round):
    window_size, rounds = 3, 9
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
        model_aggregator=WindowedModelAveragingFactory(
            window_size, mode=mode, start_round=start_round
        ),
    )
    observed, window_models = _run(process, rounds)
    expected = task.simulate(window_size, mode, start_round, rounds)
    for t in range(1, rounds + 1):
      np.testing.assert_allclose(
          observed[t], expected['sent'][t], atol=1e-5, err_msg=f'round {t}'
      )
      np.testing.assert_allclose(
          window_models[t],
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize('builder', sorted(_other_builders()))
  def test_in_other_tff_builders_window_is_mean_of_observed_models(
      self, builder
  ):
    # Evaluate mode leaves each builder's trajectory unchanged, so the window
    # model must be the mean of the last W global models seen in the states.
    window_size, rounds = 3, 5
    process = _other_builders()[builder](
        WindowedModelAveragingFactory(window_size)
    )
    observed, window_models = _run(process, rounds)
    for t in range(1, rounds + 1):
      expected = (
          np.mean(observed[t - window_size + 1 : t + 1], axis=0)
          if t >= window_size
          else observed[t]
      )
      np.testing.assert_allclose(
          window_models[t], expected, atol=1e-5, err_msg=f'{builder} round {t}'
      )

  def test_unit_window_in_tff_builder_reproduces_plain_fed_avg(self):
    rounds = 5
    client_opt = tff.learning.optimizers.build_sgdm(task.CLIENT_LR)
    plain, _ = _run(
        tff.learning.algorithms.build_weighted_fed_avg(
            task.model_fn, client_opt
        ),
        rounds,
        with_window=False,
    )
    for factory in (
        WindowedModelAveragingFactory(1, mode='broadcast'),
        WindowedModelAveragingFactory(3, mode='broadcast', start_round=100),
    ):
      windowed, window_models = _run(
          tff.learning.algorithms.build_weighted_fed_avg(
              task.model_fn, client_opt, model_aggregator=factory
          ),
          rounds,
      )
      np.testing.assert_allclose(windowed, plain, atol=1e-6)
      np.testing.assert_allclose(window_models[1:], plain[1:], atol=1e-6)

  def test_with_server_sgd_lr_other_than_one_offset_is_scaled_as_documented(
      self,
  ):
    # Documented behaviour: with server SGD(eta) the factory averages the
    # virtual SGD(1.0) models v^t = v^{t-1} - a_t. Since w^t = w^0 + eta * v^t,
    # window_model_weights = w^t + (mean(v) - v^t)
    #                      = w^t + (mean(w) - w^t) / eta.
    eta, window_size, rounds = 0.5, 3, 5
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(eta),
        model_aggregator=WindowedModelAveragingFactory(window_size),
    )
    observed, window_models = _run(process, rounds)
    for t in range(window_size, rounds + 1):
      true_mean = np.mean(observed[t - window_size + 1 : t + 1], axis=0)
      np.testing.assert_allclose(
          window_models[t],
          observed[t] + (true_mean - observed[t]) / eta,
          atol=1e-5,
          err_msg=f'round {t}',
      )


class TestWindowedModelAveragingFactoryArguments:

  @pytest.mark.parametrize(
      'args,kwargs,error,pattern',
      [
          ((0,), {}, ValueError, 'window_size.*>= 1'),
          ((2.0,), {}, ValueError, 'window_size.*integer'),
          ((True,), {}, ValueError, 'window_size'),
          (('3',), {}, ValueError, 'window_size'),
          (
              (3,),
              dict(mode='ima'),
              ValueError,
              '`mode` must be one of evaluate, broadcast',
          ),
          ((3,), dict(start_round=-2), ValueError, 'start_round.*>= 0'),
          ((3,), dict(read_every=0), ValueError, 'read_every.*>= 1'),
          (
              (3,),
              dict(mode='broadcast', read_every=5),
              ValueError,
              'read_every.*broadcast',
          ),
          ((3,), dict(inner_factory='mean'), TypeError, 'inner_factory'),
      ],
  )
  def test_bad_arguments_raise_naming_the_argument(
      self, args, kwargs, error, pattern
  ):
    with pytest.raises(error, match=pattern):
      WindowedModelAveragingFactory(*args, **kwargs)

  def test_non_float_values_raise_type_error(self):
    with pytest.raises(TypeError, match='value_type.*floating'):
      WindowedModelAveragingFactory(3).create(
          tff.to_type([(np.int32, [2])]), WEIGHT_TYPE
      )

  def test_unweighted_create_with_weighted_only_inner_raises(self):
    with pytest.raises(TypeError, match='UnweightedAggregationFactory'):
      WindowedModelAveragingFactory(
          3, inner_factory=_SumPlusOneFactory()
      ).create(VALUE_TYPE)
