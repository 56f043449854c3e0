"""Window-based model averaging (WiMA, IMA) as a stateful TFF aggregation factory.

The server keeps a window of the last W global models w^{t-W+1} .. w^t and its
uniform mean, the window model (WiMA Eq. 4, IMA Algorithm 1):

    m^t = (1/W) * sum_{k=0}^{W-1} w^{t-k},    active at t >= max(W, start_round).

Before that, the window model is the global model w^t. Two modes:

* `'evaluate'` (WiMA): training is exactly the un-windowed trajectory; m^t is
  what is evaluated and exported.
* `'broadcast'` (IMA): from the first active round on, clients start the next
  round from m^t. The window always holds the aggregated models w^t, never the
  averages themselves.

Storage. The window is kept as `K = ceil(W / E)` segment sums, where E
(`read_every`) is how often the window model is needed: the window model is
exact at rounds t with t % E == 0 (every round for E = 1). Segments end at the
rounds tau with (tau + W) % E == 0, so that at every read round the K slots
hold exactly w^{t-W+1} .. w^t (the oldest slot is dropped when a new segment
starts). A running sum makes each round O(model size); it is recomputed exactly
from the slots every K segments (amortized O(model size / E)), so rounding
never accumulates over a long run.

This module holds the window arithmetic (shared with the exact post-optimizer
finalizer of `tff_fedwin.algorithms.build_fed_win`) and
`WindowedModelAveragingFactory`, which works in *delta space*: a
`model_aggregator` of TFF's learning builders sees client deltas
(initial - trained) and emits the aggregate the server optimizer applies. With
server SGD(learning_rate=1.0) the new model is w^t = w^{t-1} - aggregate, so
the factory can track every model as its position relative to the initial model
w^0 (the running sum of minus the emitted aggregates) and is exact in both
modes (DESIGN.md sec. 2.1, "Delta space").
"""

import collections
import math
from typing import Any, NamedTuple, Optional, Union

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

MODES = ('evaluate', 'broadcast')


class WindowBuffer(NamedTuple):
  """The window of the last W models, as segment sums (see module docstring).

  Attributes:
    slots: A structure like the model; each tensor has a leading axis of size
      K = ceil(W / E): the sums of the models in each segment.
    window_sum: A structure like the model: the sum of all slots.
    cursor: int32 scalar, the slot accumulating the current segment.
    num_models: int32 scalar, the number of models pushed (= rounds done).
    window_size: int32 scalar W.
    read_every: int32 scalar E.
    start_round: int32 scalar: the window is active from
      max(W, start_round) on.
    broadcast: bool scalar, True in `'broadcast'` (IMA) mode.
  """

  slots: Any
  window_sum: Any
  cursor: Any
  num_models: Any
  window_size: Any
  read_every: Any
  start_round: Any
  broadcast: Any


def to_nest(value: Any) -> Any:
  """`tff.structure.Struct` (no Python container) -> tuple/OrderedDict nest."""
  if isinstance(value, tff.structure.Struct):
    return tff.structure.to_odict_or_tuple(value, recursive=True)
  return value


def num_slots(window_size: int, read_every: int) -> int:
  """K = ceil(W / E): the number of model-sized slots the window keeps."""
  return math.ceil(window_size / read_every)


def validate_window_args(
    window_size: Any, mode: Any, start_round: Any, read_every: Any
) -> None:
  """Raises TypeError/ValueError naming a bad argument and the allowed values."""
  for name, value, minimum in (
      ('window_size', window_size, 1),
      ('start_round', start_round, 0),
      ('read_every', read_every, 1),
  ):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
      raise TypeError(
          f'`{name}` must be an int >= {minimum}, got {value!r} of type '
          f'{type(value).__name__}.'
      )
    if value < minimum:
      raise ValueError(f'`{name}` must be an int >= {minimum}, got {value}.')
  if mode not in MODES:
    raise ValueError(f'`mode` must be one of {MODES}, got {mode!r}.')
  if mode == 'broadcast' and read_every != 1:
    raise ValueError(
        "`read_every` must be 1 in mode='broadcast' (IMA sends the window "
        f'model to clients every round from the start round), got {read_every}.'
    )


def check_float_structure(value_type: tff.Type, argument_name: str) -> None:
  """Raises TypeError unless every leaf of `value_type` is a float tensor."""
  leaves = tff.structure.flatten(value_type) if isinstance(
      value_type, tff.StructType) else [value_type]
  for leaf in leaves:
    if not (
        isinstance(leaf, tff.TensorType)
        and np.issubdtype(leaf.dtype.type, np.floating)
    ):
      raise TypeError(
          f'`{argument_name}` must be a structure of floating-point tensors '
          f'(float16/32/64) to be averaged by the window, found {leaf} in '
          f'{value_type}.'
      )


def initial_window(
    model_like: Any,
    window_size: int,
    mode: str,
    start_round: int,
    read_every: int,
) -> WindowBuffer:
  """An empty window for models shaped like `model_like` (TF, in a graph)."""
  k = num_slots(window_size, read_every)
  return WindowBuffer(
      slots=tf.nest.map_structure(
          lambda x: tf.zeros([k] + x.shape.as_list(), x.dtype), model_like
      ),
      window_sum=tf.nest.map_structure(tf.zeros_like, model_like),
      cursor=tf.constant(0, tf.int32),
      num_models=tf.constant(0, tf.int32),
      window_size=tf.constant(window_size, tf.int32),
      read_every=tf.constant(read_every, tf.int32),
      start_round=tf.constant(start_round, tf.int32),
      broadcast=tf.constant(mode == 'broadcast'),
  )


def window_push(window: WindowBuffer, model: Any) -> WindowBuffer:
  """Adds the model of round t = num_models + 1 to the window.

  If round t-1 ended a segment ((t - 1 + W) % E == 0), the next slot becomes
  the current one first: its old content (the oldest segment, no longer in any
  window read from now on) is dropped. O(model size), plus an exact recompute
  of the running sum from the slots whenever the cursor wraps to slot 0.

  Args:
    window: A `WindowBuffer`.
    model: A structure matching `window.window_sum`: the model w^t.

  Returns:
    The updated `WindowBuffer`.
  """
  k = tf.shape(tf.nest.flatten(window.slots)[0])[0]
  prev = window.num_models
  starts_segment = tf.logical_and(
      prev > 0,
      tf.equal(tf.math.floormod(prev + window.window_size, window.read_every),
               0),
  )

  def advance():
    nxt = tf.math.floormod(window.cursor + 1, k)
    index = tf.reshape(nxt, [1, 1])
    slots = tf.nest.map_structure(
        lambda s: tf.tensor_scatter_nd_update(
            s, index, tf.zeros_like(s[:1])), window.slots)
    window_sum = tf.cond(
        tf.equal(nxt, 0),
        lambda: tf.nest.map_structure(
            lambda s: tf.reduce_sum(s, axis=0), slots),
        lambda: tf.nest.map_structure(
            lambda total, s: total - s[nxt], window.window_sum, window.slots),
    )
    return slots, window_sum, nxt

  slots, window_sum, cursor = tf.cond(
      starts_segment,
      advance,
      lambda: (window.slots, window.window_sum, window.cursor),
  )
  index = tf.reshape(cursor, [1, 1])
  slots = tf.nest.map_structure(
      lambda s, m: tf.tensor_scatter_nd_add(s, index, m[tf.newaxis]),
      slots, model)
  window_sum = tf.nest.map_structure(tf.add, window_sum, model)
  return window._replace(
      slots=slots, window_sum=window_sum, cursor=cursor, num_models=prev + 1)


def window_is_active(window: WindowBuffer) -> tf.Tensor:
  """Whether the window model of the last pushed round t is m^t (bool).

  True iff t >= max(W, start_round) and t % E == 0.
  """
  t = window.num_models
  return tf.logical_and(
      t >= tf.maximum(window.window_size, window.start_round),
      tf.equal(tf.math.floormod(t, window.read_every), 0),
  )


def window_mean(window: WindowBuffer) -> Any:
  """(1/W) * sum of the window (WiMA Eq. 4); meaningful when active."""
  size = window.window_size
  return tf.nest.map_structure(
      lambda s: s / tf.cast(size, s.dtype), window.window_sum)


def window_measurements(
    window: WindowBuffer, window_model: Any, model: Any
) -> collections.OrderedDict:
  """Per-round measurements: fill, activity, ||window model - w^t||_2."""
  squared = [
      tf.reduce_sum(tf.square(tf.cast(a - b, tf.float64)))
      for a, b in zip(tf.nest.flatten(window_model), tf.nest.flatten(model))
  ]
  return collections.OrderedDict(
      window_fill=tf.minimum(window.num_models, window.window_size),
      window_active=window_is_active(window),
      window_distance=tf.cast(tf.sqrt(tf.add_n(squared)), tf.float32),
  )


def window_step(window: WindowBuffer, model_weights: Any):
  """Pushes the model w^t of this round; returns what the server keeps.

  Shared by the exact post-server-step windows (`build_fed_win`'s finalizer,
  SCAFFOLD).

  Args:
    window: A `WindowBuffer` of absolute trainable weights.
    model_weights: `tff.learning.models.ModelWeights` w^t after the server step.

  Returns:
    `(window, model_weights, measurements)`: the updated window; the model the
    clients start the next round from (trainable weights replaced by the window
    mean m^t only in `'broadcast'` mode at active rounds, IMA); the
    `window_measurements`.
  """
  model = model_weights.trainable
  window = window_push(window, model)
  active = window_is_active(window)
  mean = window_mean(window)
  window_model = tf.nest.map_structure(
      lambda m, w: tf.where(active, m, w), mean, model)
  send_mean = tf.logical_and(active, window.broadcast)
  sent = tf.nest.map_structure(
      lambda m, w: tf.where(send_mean, m, w), mean, model)
  return (
      window,
      tff.learning.models.ModelWeights(sent, model_weights.non_trainable),
      window_measurements(window, window_model, model),
  )


class WindowAggregatorState(NamedTuple):
  """State of `WindowedModelAveragingFactory`'s aggregation process.

  Attributes:
    inner: The state of the inner aggregation process.
    window: A `WindowBuffer` of model positions relative to w^0.
    position: The position of the current global model relative to w^0
      (the sum of minus the emitted aggregates): w^t in evaluate mode, the
      model sent to clients (m^t when active) in broadcast mode.
  """

  inner: Any
  window: WindowBuffer
  position: Any


class WindowedModelAveragingFactory(
    tff.aggregators.UnweightedAggregationFactory,
    tff.aggregators.WeightedAggregationFactory,
):
  """`tff.aggregators` factory whose process state carries the model window.

  Use it as `model_aggregator=` of TFF's learning builders
  (`build_weighted_fed_avg`, `build_unweighted_fed_avg`,
  `build_weighted_fed_prox`, `build_weighted_mime_lite`,
  `build_weighted_fed_avg_with_optimizer_schedule`) and read the window model
  with `tff_fedwin.aggregators.window_model_weights(state)`.

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
      inner_factory: Optional[
          Union[
              tff.aggregators.UnweightedAggregationFactory,
              tff.aggregators.WeightedAggregationFactory,
          ]
      ] = None,
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
    validate_window_args(window_size, mode, start_round, read_every)
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
    self._window_size = int(window_size)
    self._mode = mode
    self._start_round = int(start_round)
    self._read_every = int(read_every)
    self._inner_factory = inner_factory

  @classmethod
  def wima(cls, window_size: int = 100, **kwargs):
    """WiMA: evaluate the mean of the last `window_size` models (paper W=100)."""
    return cls(window_size, mode='evaluate', **kwargs)

  @classmethod
  def ima(cls, window_size: int = 5, *, start_round: int, **kwargs):
    """IMA: broadcast the mean of the last P models from round t_s (P=5)."""
    return cls(window_size, mode='broadcast', start_round=start_round, **kwargs)

  def create(self, value_type, weight_type=None) -> tff.templates.AggregationProcess:
    check_float_structure(value_type, 'value_type')
    weighted = weight_type is not None
    inner_factory = self._inner_factory
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
    inner = (
        inner_factory.create(value_type, weight_type)
        if weighted
        else inner_factory.create(value_type)
    )
    window_size, mode = self._window_size, self._mode
    start_round, read_every = self._start_round, self._read_every

    @tff.tensorflow.computation
    def init_window_fn():
      zeros = tf.nest.map_structure(
          lambda spec: tf.zeros(spec.shape, spec.dtype),
          tff.types.type_to_tf_tensor_specs(value_type),
      )
      return (
          initial_window(zeros, window_size, mode, start_round, read_every),
          zeros,
      )

    window_type, position_type = init_window_fn.type_signature.result

    @tff.tensorflow.computation(window_type, position_type, value_type)
    def window_step_fn(window, position, aggregate):
      aggregate = to_nest(aggregate)
      # The model this round aggregated: w^t = x^{t-1} - aggregate.
      model = tf.nest.map_structure(tf.subtract, position, aggregate)
      window = window_push(window, model)
      apply_window = tf.logical_and(window.broadcast, window_is_active(window))
      mean = window_mean(window)
      new_position = tf.nest.map_structure(
          lambda m, w: tf.where(apply_window, m, w), mean, model)
      # Emit the aggregate itself unless the window model is sent, so that
      # inactive rounds are bit-identical to the plain process.
      result = tf.nest.map_structure(
          lambda p, new, agg: tf.where(apply_window, p - new, agg),
          position, new_position, aggregate)
      window_model = tf.nest.map_structure(
          lambda m, w: tf.where(window_is_active(window), m, w), mean, model)
      measurements = window_measurements(window, window_model, model)
      return window, new_position, result, measurements

    @tff.federated_computation()
    def init_fn():
      window, position = tff.federated_eval(init_window_fn, tff.SERVER)
      return tff.federated_zip(
          WindowAggregatorState(inner.initialize(), window, position))

    state_type = init_fn.type_signature.result

    def next_body(state, value, weight=None):
      # Inner aggregation.
      if weighted:
        inner_output = inner.next(state.inner, value, weight)
      else:
        inner_output = inner.next(state.inner, value)
      # Server computation.
      window, position, result, window_measures = tff.federated_map(
          window_step_fn, (state.window, state.position, inner_output.result))
      # Output preparation.
      new_state = tff.federated_zip(
          WindowAggregatorState(inner_output.state, window, position))
      measurements = tff.federated_zip(
          collections.OrderedDict(
              inner=inner_output.measurements, window=window_measures))
      return tff.templates.MeasuredProcessOutput(
          state=new_state, result=result, measurements=measurements)

    if weighted:
      @tff.federated_computation(
          state_type,
          tff.FederatedType(value_type, tff.CLIENTS),
          tff.FederatedType(weight_type, tff.CLIENTS),
      )
      def next_fn(state, value, weight):
        return next_body(state, value, weight)
    else:
      @tff.federated_computation(
          state_type, tff.FederatedType(value_type, tff.CLIENTS))
      def next_fn(state, value):
        return next_body(state, value)

    return tff.templates.AggregationProcess(init_fn, next_fn)


def _find_states(obj, wanted_type, found):
  if isinstance(obj, wanted_type):
    found.append(obj)
    return
  if attrs.has(type(obj)):
    obj = attrs.asdict(obj, recurse=False)
  if isinstance(obj, dict):
    for value in obj.values():
      _find_states(value, wanted_type, found)
  elif isinstance(obj, (list, tuple)):
    for value in obj:
      _find_states(value, wanted_type, found)


def find_window_states(state: Any, wanted_type) -> list:
  """All instances of `wanted_type` nested anywhere in a process state."""
  found = []
  _find_states(state, wanted_type, found)
  return found


def window_offset_numpy(window: WindowBuffer, position: Any) -> Any:
  """(mean of the window) - position, in numpy; None if the window is inactive."""
  t = int(window.num_models)
  active = t >= max(int(window.window_size), int(window.start_round)) and (
      t % int(window.read_every) == 0)
  if not active or bool(window.broadcast):
    return None
  return tf.nest.map_structure(
      lambda s, p: np.asarray(s) / int(window.window_size) - np.asarray(p),
      window.window_sum, position)


def window_model_weights(state: Any) -> tff.learning.models.ModelWeights:
  """The window model of a learning process state (numpy, no TFF call).

  Works on the state of any `tff.learning.templates.LearningProcess` composed
  with `WindowedModelAveragingFactory` as (part of) its model aggregator, and
  on the state of `tff_fedwin.algorithms.build_fed_win`.

  Args:
    state: A `tff.learning.templates.LearningAlgorithmState` (or any state
      with `global_model_weights` and one window nested in it).

  Returns:
    `tff.learning.models.ModelWeights`: the window model m^t if the window is
    active at the last round, else the global model (in `'broadcast'` mode the
    global model already is m^t). Non-trainable weights are the global
    model's.

  Raises:
    ValueError: If `state` holds no window or more than one.
  """
  global_weights = state.global_model_weights
  found = find_window_states(state, WindowAggregatorState)
  absolute = []
  if not found:
    # The exact finalizer of build_fed_win keeps absolute models.
    absolute = find_window_states(state, WindowBuffer)
  if len(found) + len(absolute) != 1:
    raise ValueError(
        '`state` must hold exactly one window (a WindowedModelAveragingFactory '
        f'aggregator or a build_fed_win finalizer); found {len(found)} '
        f'aggregator windows and {len(absolute)} finalizer windows.'
    )
  trainable = global_weights.trainable
  if found:
    window_state = found[0]
    offset = window_offset_numpy(window_state.window, window_state.position)
    if offset is not None:
      trainable = tf.nest.map_structure(
          lambda w, o: (np.asarray(w) + o).astype(np.asarray(w).dtype),
          trainable, _like(trainable, offset))
  else:
    window = absolute[0]
    t = int(window.num_models)
    active = t >= max(int(window.window_size), int(window.start_round)) and (
        t % int(window.read_every) == 0)
    if active and not bool(window.broadcast):
      trainable = _like(trainable, tf.nest.map_structure(
          lambda s: np.asarray(s) / int(window.window_size),
          window.window_sum))
  return tff.learning.models.ModelWeights(
      trainable=trainable, non_trainable=global_weights.non_trainable)


def _like(reference, values):
  """`values` repacked into the structure (and container types) of `reference`."""
  return tf.nest.pack_sequence_as(reference, tf.nest.flatten(values))
