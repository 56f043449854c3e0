"""`WindowedModelAveragingFactory`: the window as a `tff.aggregators` factory.

A stateful aggregation factory for the `model_aggregator=` of TFF's learning
builders. It works in delta space: it sees the client deltas and tracks every
model as its position relative to w^0, exact with server SGD(1.0)
(docs/design.md sec. 1).
"""

import collections
from typing import Optional, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators.window_state import WindowAggregatorState

_Factory = Union[
    tff.aggregators.UnweightedAggregationFactory,
    tff.aggregators.WeightedAggregationFactory,
]


def _to_nest(value):
  """`tff.structure.Struct` (no Python container) -> tuple/OrderedDict nest."""
  if isinstance(value, tff.structure.Struct):
    return tff.structure.to_odict_or_tuple(value, recursive=True)
  return value


def _inner_process(inner_factory, value_type, weight_type):
  """The inner aggregation process: the given factory or a mean."""
  weighted = weight_type is not None
  if inner_factory is None:
    inner_factory = (
        tff.aggregators.MeanFactory()
        if weighted
        else tff.aggregators.UnweightedMeanFactory()
    )
  wanted = (
      tff.aggregators.WeightedAggregationFactory
      if weighted
      else tff.aggregators.UnweightedAggregationFactory
  )
  if not isinstance(inner_factory, wanted):
    raise TypeError(
        f'A {"weighted" if weighted else "unweighted"} aggregation needs an '
        f'`inner_factory` that is a tff.aggregators.{wanted.__name__}, got '
        f'{type(inner_factory).__name__}.'
    )
  if weighted:
    return inner_factory.create(value_type, weight_type)
  return inner_factory.create(value_type)


class WindowedModelAveragingFactory(
    tff.aggregators.UnweightedAggregationFactory,
    tff.aggregators.WeightedAggregationFactory,
):
  """`tff.aggregators` factory whose process state carries the model window.

  Use it as `model_aggregator=` of TFF's learning builders
  (`build_weighted_fed_avg`, `build_unweighted_fed_avg`,
  `build_weighted_fed_prox`, `build_weighted_mime_lite`,
  `build_weighted_fed_avg_with_optimizer_schedule`) and read the window model
  with `tff_fedwin.aggregators.window_model_weights(state)`; the same state
  also gives the windows of sizes W' <= W with W - W' a multiple of
  `read_every` (`window_model_weights(state, window_size=W')`, docs/design.md
  sec. 1.11).

  The created process has the type signatures

    initialize: `( -> WindowAggregatorState@SERVER)`
    next: `(<WindowAggregatorState@SERVER, {V}@CLIENTS[, {W}@CLIENTS]> ->
           <state=WindowAggregatorState@SERVER, result=V@SERVER,
            measurements=M@SERVER>)`

  where `result` is the inner aggregate (the mean delta) in `'evaluate'` mode,
  and in `'broadcast'` mode, at active rounds, the aggregate that moves the
  current model to the window model m^t.

  Exactness. The window is exact when the server update is
  w^t = w^{t-1} - result, i.e. server SGD with learning rate 1.0 (TFF's
  default for `build_weighted_fed_avg`, FedProx and Mime Lite). With any other
  server optimizer the factory still averages the *virtual* models
  v^t = v^{t-1} - result (the SGD(1.0) trajectory of the same aggregates):
  `window_model_weights` returns w^t + (mean of the last W v's - v^t). For
  server SGD with learning rate eta that offset is 1/eta times the true one;
  with momentum or adaptive optimizers it is not the window of the true
  models, and the optimizer's internal state is not averaged. For exact
  post-optimizer windows use `tff_fedwin.algorithms.build_fed_win`, which keeps
  the window after the server optimizer (WiMA Eq. 7).
  """

  def __init__(
      self,
      window_size: int,
      *,
      mode: str = 'evaluate',
      start_round: int = 0,
      read_every: int = 1,
      inner_factory: Optional[_Factory] = None,
  ):
    """Initializes the factory.

    Args:
      window_size: W >= 1, the number of global models averaged.
      mode: `'evaluate'` (WiMA) or `'broadcast'` (IMA).
      start_round: The window model is active from round
        max(window_size, start_round) on (IMA's t_s; 0 for WiMA).
      read_every: E >= 1: the window model is needed (exact, active) only at
        rounds t % E == 0, which lets the state keep ceil(W/E) model-sized
        slots instead of W. Must be 1 in `'broadcast'` mode.
      inner_factory: The aggregation of client deltas; defaults to
        `tff.aggregators.MeanFactory()` (weighted) or
        `tff.aggregators.UnweightedMeanFactory()` (unweighted).
    """
    window_math.check_window_args(
        window_size=window_size,
        mode=mode,
        start_round=start_round,
        read_every=read_every,
    )
    if inner_factory is not None and not isinstance(
        inner_factory,
        (
            tff.aggregators.UnweightedAggregationFactory,
            tff.aggregators.WeightedAggregationFactory,
        ),
    ):
      raise TypeError(
          '`inner_factory` must be a tff.aggregators.WeightedAggregationFactory'
          ' or UnweightedAggregationFactory, got '
          f'{type(inner_factory).__name__}.'
      )
    self._window_args = dict(
        window_size=int(window_size),
        mode=mode,
        start_round=int(start_round),
        read_every=int(read_every),
    )
    self._inner_factory = inner_factory

  @classmethod
  def wima(cls, window_size: int = 100, **kwargs):
    """WiMA: evaluate the mean of the last `window_size` models (paper: 100)."""
    return cls(window_size, mode='evaluate', **kwargs)

  @classmethod
  def ima(cls, window_size: int = 5, *, start_round: int, **kwargs):
    """IMA: broadcast the mean of the last P models from round t_s (P=5)."""
    return cls(window_size, mode='broadcast', start_round=start_round, **kwargs)

  def create(
      self, value_type, weight_type=None
  ) -> tff.templates.AggregationProcess:
    window_math.check_float_structure(value_type, 'value_type')
    inner = _inner_process(self._inner_factory, value_type, weight_type)
    window_args = self._window_args

    @tff.tensorflow.computation
    def init_window_fn():
      zeros = tf.nest.map_structure(
          lambda spec: tf.zeros(spec.shape, spec.dtype),
          tff.types.type_to_tf_tensor_specs(value_type),
      )
      return window_math.initial_window(zeros, **window_args), zeros

    window_type, position_type = init_window_fn.type_signature.result

    @tff.tensorflow.computation(window_type, position_type, value_type)
    def window_step_fn(window, position, aggregate):
      return window_math.delta_window_step(
          window, position, _to_nest(aggregate)
      )

    @tff.federated_computation()
    def init_fn():
      window, position = tff.federated_eval(init_window_fn, tff.SERVER)
      return tff.federated_zip(
          WindowAggregatorState(inner.initialize(), window, position)
      )

    return tff.templates.AggregationProcess(
        init_fn,
        _build_next_fn(
            inner,
            window_step_fn,
            init_fn.type_signature.result,
            value_type=value_type,
            weight_type=weight_type,
        ),
    )


def _build_next_fn(
    inner, window_step_fn, state_type, *, value_type, weight_type
):
  """The `next` computation: inner aggregation, then the window step."""

  def next_body(state, value, weight=None):
    # Inner aggregation.
    if weight_type is not None:
      inner_output = inner.next(state.inner, value, weight)
    else:
      inner_output = inner.next(state.inner, value)
    # Server computation.
    window, position, result, window_measures = tff.federated_map(
        window_step_fn, (state.window, state.position, inner_output.result)
    )
    # Output preparation.
    new_state = tff.federated_zip(
        WindowAggregatorState(inner_output.state, window, position)
    )
    measurements = tff.federated_zip(
        collections.OrderedDict(
            inner=inner_output.measurements, window=window_measures
        )
    )
    return tff.templates.MeasuredProcessOutput(
        state=new_state, result=result, measurements=measurements
    )

  value_at_clients = tff.FederatedType(value_type, tff.CLIENTS)
  if weight_type is not None:

    @tff.federated_computation(
        state_type,
        value_at_clients,
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def weighted_next_fn(state, value, weight):
      return next_body(state, value, weight)

    return weighted_next_fn

  @tff.federated_computation(state_type, value_at_clients)
  def next_fn(state, value):
    return next_body(state, value)

  return next_fn
