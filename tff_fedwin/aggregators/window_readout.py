"""Reading the window model out of a returned process state (numpy).

Works on the state of any learning process composed with
`WindowedModelAveragingFactory`, on `build_fed_win`'s state and on SCAFFOLD's,
without a TFF call (docs/design.md sec. 1); also the smaller windows the same
slots hold (`window_size=W'`, sec. 1.11).
"""

from typing import Any, Optional

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


def readable_window_sizes(window: WindowBuffer) -> list[int]:
  """The window sizes W' whose mean `window` holds at its read rounds.

  Every W' <= W with W - W' a multiple of E: the newest ceil(W'/E) slots
  (docs/design.md sec. 1.11, 'In the process state').
  """
  size = int(window.window_size)
  return list(range(size, 0, -int(window.read_every)))[::-1]


def check_readable_window_size(window: WindowBuffer, window_size: Any) -> None:
  """Raises ValueError unless `window_size` is in `readable_window_sizes`."""
  allowed = readable_window_sizes(window)
  if (
      isinstance(window_size, (int, np.integer))
      and not isinstance(window_size, bool)
      and window_size in allowed
  ):
    return
  listed = ', '.join(map(str, allowed[:3]))
  if len(allowed) > 3:
    listed += f', ..., {allowed[-1]}'
  raise ValueError(
      f'window_size {window_size!r} cannot be read from a window of '
      f'W = {int(window.window_size)} models read every '
      f"E = {int(window.read_every)} rounds: it needs W' <= W with W - W' "
      f'a multiple of E, i.e. one of {listed}.'
  )


def _is_main(window: WindowBuffer, window_size: Optional[int]) -> bool:
  return window_size is None or window_size == int(window.window_size)


def reads_mean_numpy(
    window: WindowBuffer, window_size: Optional[int] = None
) -> bool:
  """Whether the model of that window size is its mean (not the global).

  The window's own size: `window_math.reads_window_mean_numpy`. Another
  size W' is evaluated only, never sent: its mean at t >= max(W',
  start_round) with t % E == 0, in either mode.
  """
  if _is_main(window, window_size):
    return window_math.reads_window_mean_numpy(window)
  check_readable_window_size(window, window_size)
  return window_math.is_active_round(
      int(window.num_models),
      window_size=window_size,
      start_round=int(window.start_round),
      read_every=int(window.read_every),
  )


def _mean(window: WindowBuffer, window_size: Optional[int]) -> Any:
  """(1/W') * the sum of the last W' models (WiMA Eq. 4), numpy.

  The window's own size divides its running sum; another size adds its
  newest ceil(W'/E) slots in float64 (the slot at `cursor` is the newest).
  """
  if _is_main(window, window_size):
    return window_math.window_mean_numpy(window)
  count = -(-window_size // int(window.read_every))
  slots = tf.nest.flatten(window.slots)
  num_slots = np.asarray(slots[0]).shape[0]
  newest = (int(window.cursor) - np.arange(count)) % num_slots
  return tf.nest.map_structure(
      lambda s: (
          np.asarray(s)[newest].sum(axis=0, dtype=np.float64) / window_size
      ).astype(np.asarray(s).dtype),
      window.slots,
  )


def window_offset_numpy(
    window: WindowBuffer, position: Any, window_size: Optional[int] = None
) -> Any:
  """m^t - position, in numpy; None unless the window mean is read.

  For a `WindowAggregatorState` (positions relative to w^0) this is the
  offset m^t - w^t that `window_model_weights` adds to the global model.
  `window_size`: another W' in `readable_window_sizes(window)` (None: W).
  """
  if not reads_mean_numpy(window, window_size):
    return None
  return tf.nest.map_structure(
      lambda m, p: m - np.asarray(p), _mean(window, window_size), position
  )


def _aggregator_window_trainable(window_state, trainable, window_size):
  """w^t + (m^t - w^t) from an aggregator's positions relative to w^0."""
  offset = window_offset_numpy(
      window_state.window, window_state.position, window_size
  )
  if offset is None:
    return trainable
  return tf.nest.map_structure(
      lambda w, o: (np.asarray(w) + o).astype(np.asarray(w).dtype),
      trainable,
      _like(trainable, offset),
  )


def _absolute_window_trainable(window, trainable, window_size):
  """m^t from a window of absolute models (the finalizer, SCAFFOLD)."""
  if not reads_mean_numpy(window, window_size):
    return trainable
  return _like(trainable, _mean(window, window_size))


def window_model_weights(
    state: Any, window_size: Optional[int] = None
) -> tff.learning.models.ModelWeights:
  """The window model of a learning process state (numpy, no TFF call).

  Args:
    state: A `tff.learning.templates.LearningAlgorithmState` (or any state
      with `global_model_weights` and one window nested in it).
    window_size: None for the window's own size W; or another size W' in
      `readable_window_sizes` (docs/design.md sec. 1.11).

  Returns:
    `tff.learning.models.ModelWeights`: the window model m^t if the window is
    active at the last round, else the global model (in `'broadcast'` mode the
    global model already is m^t of size W; another size W' is read in either
    mode). Non-trainable weights are the global model's.

  Raises:
    ValueError: If `state` holds no window or more than one, or if
      `window_size` cannot be read from it (the message lists the sizes).
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
    trainable = _aggregator_window_trainable(
        found[0], global_weights.trainable, window_size
    )
  else:
    trainable = _absolute_window_trainable(
        absolute[0], global_weights.trainable, window_size
    )
  return tff.learning.models.ModelWeights(
      trainable=trainable, non_trainable=global_weights.non_trainable
  )


def state_window(state: Any) -> WindowBuffer:
  """The one `WindowBuffer` nested in a process state.

  Raises:
    ValueError: If `state` holds no window or more than one.
  """
  found = find_window_states(state, WindowBuffer)
  if len(found) != 1:
    raise ValueError(
        f'`state` must hold exactly one window; found {len(found)}.'
    )
  return found[0]


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
