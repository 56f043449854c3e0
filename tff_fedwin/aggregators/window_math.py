"""The window arithmetic of WiMA and IMA, shared by every windowed process.

The window model is m^t = (1/W) * sum_{k=0}^{W-1} w^{t-k} (WiMA Eq. 4, IMA
Algorithm 1), active at rounds t >= max(W, start_round) with t % E == 0; before
that it is the global model w^t (docs/design.md sec. 1). This module holds the
argument checks, the TF functions on a `WindowBuffer` (push, active test,
mean, model choice, the two server steps) and their numpy read-out.
"""

import collections
import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin.aggregators.window_state import WindowBuffer

MODES = choices.WINDOW_MODES


# Argument checks.


def check_window_args(
    *,
    window_size: Any,
    mode: Any,
    start_round: Any,
    read_every: Any,
    prefix: str = '',
) -> None:
  """Raises ValueError naming a bad window argument and the allowed values.

  Args:
    window_size: W, an integer >= 1.
    mode: One of `MODES`.
    start_round: An integer >= 0.
    read_every: E, an integer >= 1; 1 in `'broadcast'` mode.
    prefix: Prefixed to the names `mode`, `start_round` and `read_every` in
      the messages (`'window_'` for the learning-process builders).
  """
  checks.check_int('window_size', window_size, minimum=1)
  checks.check_int(prefix + 'start_round', start_round, minimum=0)
  checks.check_int(prefix + 'read_every', read_every, minimum=1)
  checks.check_choice(prefix + 'mode', mode, MODES)
  if mode == 'broadcast' and read_every != 1:
    raise ValueError(
        f"`{prefix}read_every` must be 1 with {prefix}mode='broadcast' (IMA "
        'sends the window model to clients every round from the start round), '
        f'got {read_every!r}.'
    )


def checked_extra_window_sizes(
    sizes: Sequence[Any], window_size: Optional[int] = None
) -> tuple[int, ...]:
  """`extra_window_sizes` as a tuple of ints; ValueError naming it if invalid.

  Args:
    sizes: Distinct ints >= 1.
    window_size: The window's own W, which `sizes` must not repeat (None:
      not known here).
  """
  sizes = tuple(sizes)
  for size in sizes:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
      raise ValueError(f'extra_window_sizes must be ints >= 1; got {size!r}.')
  if any(size < 1 for size in sizes) or len(set(sizes)) != len(sizes):
    raise ValueError(
        f'extra_window_sizes must be distinct ints >= 1; got {list(sizes)}.'
    )
  if window_size is not None and window_size in sizes:
    raise ValueError(
        f'extra_window_sizes {list(sizes)} must not repeat window_size '
        f'({window_size}).'
    )
  return tuple(int(size) for size in sizes)


def check_float_structure(value_type: tff.Type, argument_name: str) -> None:
  """Raises TypeError unless every leaf of `value_type` is a float tensor."""
  leaves = (
      tff.structure.flatten(value_type)
      if isinstance(value_type, tff.StructType)
      else [value_type]
  )
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


def num_slots(window_size: int, read_every: int) -> int:
  """K = ceil(W / E): the number of model-sized slots the window keeps."""
  return math.ceil(window_size / read_every)


# The active test: t >= max(W, start_round) and t % E == 0. Written twice,
# side by side: in TF for the computations and in Python for returned states.


def window_is_active(window: WindowBuffer) -> tf.Tensor:
  """Whether the window model of the last pushed round t is m^t (bool tensor).

  True iff t >= max(W, start_round) and t % E == 0 (docs/design.md sec. 1).
  """
  t = window.num_models
  return tf.logical_and(
      t >= tf.maximum(window.window_size, window.start_round),
      tf.equal(tf.math.floormod(t, window.read_every), 0),
  )


def is_active_round(
    round_num: int, *, window_size: int, start_round: int, read_every: int
) -> bool:
  """`window_is_active` in Python: t >= max(W, start_round) and t % E == 0."""
  return round_num >= max(window_size, start_round) and (
      round_num % read_every == 0
  )


def window_is_active_numpy(window: WindowBuffer) -> bool:
  """`window_is_active` of a window held as numpy values (a returned state)."""
  return is_active_round(
      int(window.num_models),
      window_size=int(window.window_size),
      start_round=int(window.start_round),
      read_every=int(window.read_every),
  )


# TF arithmetic on a `WindowBuffer`.


def initial_window(
    model_like: Any,
    *,
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


def _advance_segment(window: WindowBuffer):
  """Moves the cursor to the next slot and empties it (its oldest segment).

  Returns `(slots, window_sum, cursor)`. The running sum loses that segment;
  when the cursor wraps to slot 0 it is recomputed exactly from the slots, so
  rounding does not accumulate over a long run.
  """
  k = tf.shape(tf.nest.flatten(window.slots)[0])[0]
  nxt = tf.math.floormod(window.cursor + 1, k)
  index = tf.reshape(nxt, [1, 1])
  slots = tf.nest.map_structure(
      lambda s: tf.tensor_scatter_nd_update(s, index, tf.zeros_like(s[:1])),
      window.slots,
  )
  window_sum = tf.cond(
      tf.equal(nxt, 0),
      lambda: tf.nest.map_structure(lambda s: tf.reduce_sum(s, axis=0), slots),
      lambda: tf.nest.map_structure(
          lambda total, s: total - s[nxt], window.window_sum, window.slots
      ),
  )
  return slots, window_sum, nxt


def window_push(window: WindowBuffer, model: Any) -> WindowBuffer:
  """Adds the model w^t of round t = num_models + 1 to the window.

  If round t-1 ended a segment ((t - 1 + W) % E == 0), the next slot becomes
  the current one first, dropping the oldest segment. O(model size).

  Args:
    window: A `WindowBuffer`.
    model: A structure matching `window.window_sum`: the model w^t.

  Returns:
    The updated `WindowBuffer`.
  """
  prev = window.num_models
  starts_segment = tf.logical_and(
      prev > 0,
      tf.equal(
          tf.math.floormod(prev + window.window_size, window.read_every), 0
      ),
  )
  slots, window_sum, cursor = tf.cond(
      starts_segment,
      lambda: _advance_segment(window),
      lambda: (window.slots, window.window_sum, window.cursor),
  )
  index = tf.reshape(cursor, [1, 1])
  slots = tf.nest.map_structure(
      lambda s, m: tf.tensor_scatter_nd_add(s, index, m[tf.newaxis]),
      slots,
      model,
  )
  window_sum = tf.nest.map_structure(tf.add, window_sum, model)
  return window._replace(
      slots=slots, window_sum=window_sum, cursor=cursor, num_models=prev + 1
  )


def window_mean(window: WindowBuffer) -> Any:
  """(1/W) * sum of the window (WiMA Eq. 4); meaningful when active."""
  size = window.window_size
  return tf.nest.map_structure(
      lambda s: s / tf.cast(size, s.dtype), window.window_sum
  )


def _select(condition: tf.Tensor, if_true: Any, if_false: Any) -> Any:
  """`if_true` where `condition` (a bool scalar) holds, else `if_false`."""
  return tf.nest.map_structure(
      lambda a, b: tf.where(condition, a, b), if_true, if_false
  )


def evaluated_trainable(window: WindowBuffer, global_trainable: Any) -> Any:
  """The trainable weights to evaluate: the window model or the global model.

  The window mean m^t at active rounds in `'evaluate'` mode (WiMA); otherwise
  `global_trainable` (in `'broadcast'` mode the global model already is m^t).
  """
  use_mean = tf.logical_and(
      window_is_active(window), tf.logical_not(window.broadcast)
  )
  return _select(use_mean, window_mean(window), global_trainable)


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
  """The post-optimizer window step: pushes w^t, returns what the server keeps.

  Shared by `build_fed_win`'s window finalizer and SCAFFOLD.

  Args:
    window: A `WindowBuffer` of absolute trainable weights.
    model_weights: `tff.learning.models.ModelWeights` w^t after the server step.

  Returns:
    `(window, model_weights, measurements)`: the updated window; the model the
    clients start the next round from (trainable weights replaced by the window
    mean m^t only in `'broadcast'` mode at active rounds, IMA Algorithm 1); the
    `window_measurements`.
  """
  model = model_weights.trainable
  window = window_push(window, model)
  active = window_is_active(window)
  mean = window_mean(window)
  window_model = _select(active, mean, model)
  sent = _select(tf.logical_and(active, window.broadcast), mean, model)
  return (
      window,
      tff.learning.models.ModelWeights(sent, model_weights.non_trainable),
      window_measurements(window, window_model, model),
  )


def delta_window_step(window: WindowBuffer, position: Any, aggregate: Any):
  """The delta-space window step of `WindowedModelAveragingFactory`.

  Models are positions relative to w^0. The model this round aggregated is
  u^t = x^{t-1} - aggregate, where x^{t-1} = `position` is the model the
  clients started from; it is pushed to the window.

  Args:
    window: A `WindowBuffer` of positions.
    position: x^{t-1}, a structure like `aggregate`.
    aggregate: The inner aggregate (the mean client delta) of this round.

  Returns:
    `(window, position, result, measurements)`: the updated window; x^t (m^t
    in `'broadcast'` mode at active rounds, else u^t); the aggregate to emit,
    x^{t-1} - x^t (bit-identical to `aggregate` unless m^t is sent); the
    `window_measurements`.
  """
  model = tf.nest.map_structure(tf.subtract, position, aggregate)
  window = window_push(window, model)
  active = window_is_active(window)
  apply_window = tf.logical_and(window.broadcast, active)
  mean = window_mean(window)
  new_position = _select(apply_window, mean, model)
  result = tf.nest.map_structure(
      lambda p, new, agg: tf.where(apply_window, p - new, agg),
      position,
      new_position,
      aggregate,
  )
  window_model = _select(active, mean, model)
  return (
      window,
      new_position,
      result,
      window_measurements(window, window_model, model),
  )


# Numpy read-out of a window held in a returned (numpy) state.


def window_mean_numpy(window: WindowBuffer) -> Any:
  """(1/W) * sum of the window, in numpy (WiMA Eq. 4)."""
  size = int(window.window_size)
  return tf.nest.map_structure(
      lambda s: np.asarray(s) / size, window.window_sum
  )


def reads_window_mean_numpy(window: WindowBuffer) -> bool:
  """Whether the model to evaluate is the window mean, not the global model.

  True at active rounds in `'evaluate'` mode; in `'broadcast'` mode the global
  model already is m^t.
  """
  return window_is_active_numpy(window) and not bool(window.broadcast)


def window_measurements_numpy(
    *,
    num_models: int,
    window_size: int,
    active: bool,
    window_model: Any,
    model: Any,
) -> collections.OrderedDict:
  """`window_measurements` in numpy: fill, activity, ||window model - w^t||_2.

  Args:
    num_models: t, the models pushed so far.
    window_size: W (or an extra size W' read from the same models).
    active: Whether `window_model` is the window mean m^t.
    window_model: The window model (trainable weights).
    model: w^t, a structure like `window_model`.
  """
  squared = sum(
      float(np.sum(np.square(np.subtract(a, b, dtype=np.float64))))
      for a, b in zip(tf.nest.flatten(window_model), tf.nest.flatten(model))
  )
  return collections.OrderedDict(
      window_fill=np.int32(min(num_models, window_size)),
      window_active=np.bool_(active),
      window_distance=np.float32(np.sqrt(squared)),
  )
