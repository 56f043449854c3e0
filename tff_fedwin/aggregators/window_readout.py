"""Reading the window model out of a returned process state (numpy).

Works on the state of any learning process composed with
`WindowedModelAveragingFactory`, on `build_fed_win`'s state and on SCAFFOLD's,
without a TFF call (docs/design.md sec. 1).
"""

from typing import Any

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators.window_state import WindowAggregatorState
from tff_fedwin.aggregators.window_state import WindowBuffer


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


def holds_window(state: Any) -> bool:
  """Whether a process state has a window nested anywhere in it.

  A window is a `WindowAggregatorState` (a `WindowedModelAveragingFactory`
  aggregator) or a `WindowBuffer` (`build_fed_win`'s finalizer, SCAFFOLD).
  """
  return bool(find_window_states(state, (WindowAggregatorState, WindowBuffer)))


def _like(reference, values):
  """`values` repacked into the structure (and containers) of `reference`."""
  return tf.nest.pack_sequence_as(reference, tf.nest.flatten(values))


def window_offset_numpy(window: WindowBuffer, position: Any) -> Any:
  """m^t - position, in numpy; None unless the window mean is read.

  For a `WindowAggregatorState` (positions relative to w^0) this is the
  offset m^t - w^t that `window_model_weights` adds to the global model.
  """
  if not window_math.reads_window_mean_numpy(window):
    return None
  return tf.nest.map_structure(
      lambda m, p: m - np.asarray(p),
      window_math.window_mean_numpy(window),
      position,
  )


def _aggregator_window_trainable(window_state, trainable):
  """w^t + (m^t - w^t) from an aggregator's positions relative to w^0."""
  offset = window_offset_numpy(window_state.window, window_state.position)
  if offset is None:
    return trainable
  return tf.nest.map_structure(
      lambda w, o: (np.asarray(w) + o).astype(np.asarray(w).dtype),
      trainable,
      _like(trainable, offset),
  )


def _absolute_window_trainable(window, trainable):
  """m^t from a window of absolute models (the finalizer, SCAFFOLD)."""
  if not window_math.reads_window_mean_numpy(window):
    return trainable
  return _like(trainable, window_math.window_mean_numpy(window))


def window_model_weights(state: Any) -> tff.learning.models.ModelWeights:
  """The window model of a learning process state (numpy, no TFF call).

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
    absolute = find_window_states(state, WindowBuffer)
  if len(found) + len(absolute) != 1:
    raise ValueError(
        '`state` must hold exactly one window (a WindowedModelAveragingFactory '
        f'aggregator or a build_fed_win finalizer); found {len(found)} '
        f'aggregator windows and {len(absolute)} finalizer windows.'
    )
  if found:
    trainable = _aggregator_window_trainable(found[0], global_weights.trainable)
  else:
    trainable = _absolute_window_trainable(
        absolute[0], global_weights.trainable
    )
  return tff.learning.models.ModelWeights(
      trainable=trainable, non_trainable=global_weights.non_trainable
  )


def window_or_global_model_weights(
    state: Any,
) -> tff.learning.models.ModelWeights:
  """The model to evaluate: m^t if `state` holds a window, else w^t.

  Args:
    state: A process state with `global_model_weights`.

  Returns:
    `window_model_weights(state)` if `holds_window(state)`, else
    `state.global_model_weights`.
  """
  if holds_window(state):
    return window_model_weights(state)
  return state.global_model_weights
