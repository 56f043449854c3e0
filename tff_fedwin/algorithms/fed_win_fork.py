"""Forking a `build_fed_win` run: another row's state at a round before t_s.

Rows of an IMA experiment that differ only by their window (none, W = 1, a
later or earlier start) train the same trajectory until a window first acts
or the client learning rates part (docs/design.md sec. 5.6). At such a round k
the state of one run (the trunk) becomes another row's state by swapping the
window part of its finalizer; the forked row then trains on from k + 1 and
ends bit for bit where it would have ended alone. `forked_state` does the swap
on a checkpointed (numpy) state, `forked_metrics_row` the matching change of a
metrics.csv row.
"""

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tff_fedwin.aggregators.window_finalizer import WindowFinalizerState
from tff_fedwin.aggregators.window_state import WindowBuffer

# The window finalizer's measurement keys in a metrics.csv row
# (`window_finalizer._build_next_fn`); TFF's finalizer reports the
# optimizer's directly under `train/finalizer/`.
_FINALIZER = 'train/finalizer/'
_OPTIMIZER = _FINALIZER + 'optimizer/'
_WINDOW = _FINALIZER + 'window/'
_WINDOW_FILL = _WINDOW + 'window_fill'


def _check_inactive(window: WindowBuffer, round_num: int, which: str) -> None:
  """Refuses a fork at round k if `window` was active at a round <= k."""
  first_active = max(int(window.window_size), int(window.start_round))
  if round_num >= first_active:
    raise ValueError(
        f'Cannot fork at round {round_num}: the {which} window (W = '
        f'{int(window.window_size)}, start round {int(window.start_round)}) '
        f'is active from round {first_active}; fork before it.'
    )


def _one_model_window(
    target: WindowBuffer, model: Any, round_num: int
) -> WindowBuffer:
  """The W = 1, E = 1 window after round k: one slot holding w^k.

  `window_math.window_push` on such a window starts a new segment every
  round after the first: it zeroes the slot and recomputes the sum from the
  zeroed slot (0), then adds w^k to both. Zeros plus w^k here give the same
  float32 bits (including +0.0 for -0.0).
  """
  zeros_plus_model = [np.zeros_like(m) + m for m in tf.nest.flatten(model)]
  slots = [s[np.newaxis] for s in zeros_plus_model]
  return target._replace(
      slots=tf.nest.pack_sequence_as(target.slots, slots),
      window_sum=tf.nest.pack_sequence_as(
          target.window_sum, [np.zeros_like(s) + s for s in zeros_plus_model]
      ),
      cursor=np.int32(0),
      num_models=np.int32(round_num),
  )


def _forked_window(
    trunk: WindowBuffer, target: WindowBuffer, model: Any, round_num: int
) -> WindowBuffer:
  """The target's window after round k, from the trunk's and w^k."""
  same_layout = int(trunk.window_size) == int(target.window_size) and int(
      trunk.read_every
  ) == int(target.read_every)
  if same_layout:
    # The slots hold the same models; only when they are used differs.
    return trunk._replace(
        start_round=target.start_round, broadcast=target.broadcast
    )
  if int(target.window_size) == 1 and int(target.read_every) == 1:
    return _one_model_window(target, model, round_num)
  raise ValueError(
      'A forked window must have the W and E of the trunk '
      f'({int(trunk.window_size)}, {int(trunk.read_every)}) or W = E = 1; '
      f'got W = {int(target.window_size)}, E = {int(target.read_every)}.'
  )


def _check_same_shapes(state: Any, template: Any) -> None:
  """Refuses a forked state whose structure or leaves differ from the target's."""
  tf.nest.assert_same_structure(state, template)
  for got, want in zip(tf.nest.flatten(state), tf.nest.flatten(template)):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
      raise ValueError(
          'The forked state does not fit the target process: a leaf of '
          f'{got.dtype}{list(got.shape)} where the target has '
          f'{want.dtype}{list(want.shape)} (another model or task?).'
      )


def forked_state(trunk_state: Any, target_initial_state: Any, round_num: int):
  """The target row's state after round k, from the trunk's.

  Type signature (numpy, as restored from a checkpoint):
    `(LearningAlgorithmState, LearningAlgorithmState, int) ->
     LearningAlgorithmState` shaped like `target_initial_state`.

  The model, distributor, client work and aggregator states are the
  trunk's; the finalizer keeps the trunk's optimizer state and gets the
  target's window: none (TFF's finalizer state), the trunk's slots with the
  target's start round and mode (same W and E), or for W = E = 1 the one
  slot w^k. It is the caller's claim that both rows trained the same rounds
  1..k (the same config up to the window, client learning rates that agree
  up to k); this checks that no window was active by round k.

  Args:
    trunk_state: The trunk's `LearningAlgorithmState` after round k, with a
      `WindowFinalizerState` finalizer.
    target_initial_state: The target process's initial state (its structure
      and window arguments).
    round_num: k >= 1.

  Raises:
    ValueError: If the trunk has no window, a window was active by round k,
      the target window cannot be rebuilt, or the result does not fit the
      target's structure.
  """
  if not isinstance(trunk_state.finalizer, WindowFinalizerState):
    raise ValueError('The trunk state has no window finalizer to fork from.')
  trunk_window = trunk_state.finalizer.window
  _check_inactive(trunk_window, round_num, 'trunk')
  target_finalizer = target_initial_state.finalizer
  finalizer = trunk_state.finalizer.optimizer
  if isinstance(target_finalizer, WindowFinalizerState):
    _check_inactive(target_finalizer.window, round_num, 'target')
    window = _forked_window(
        trunk_window,
        target_finalizer.window,
        trunk_state.global_model_weights.trainable,
        round_num,
    )
    finalizer = WindowFinalizerState(finalizer, window)
  state = trunk_state._replace(finalizer=finalizer)
  _check_same_shapes(state, target_initial_state)
  return state


def forked_metrics_row(
    row: Mapping[str, str], target_window_size: Optional[int]
) -> dict[str, str]:
  """A trunk's metrics.csv row (round <= k) as the target run writes it.

  Without a target window the finalizer's window columns go and its
  optimizer columns move up to `train/finalizer/` (TFF's finalizer); with one
  the fill is min(t, W) of the target's W. Everything else (losses,
  accuracies, times, evaluations of a window not yet active) is the same.

  Args:
    row: Column -> value as read by `csv.DictReader`.
    target_window_size: The target's W, or None without a window.
  """
  forked = {}
  for key, value in row.items():
    if target_window_size is None:
      if key.startswith(_WINDOW):
        continue
      if key.startswith(_OPTIMIZER):
        key = _FINALIZER + key[len(_OPTIMIZER) :]
    elif key == _WINDOW_FILL and value not in (None, ''):
      value = str(min(int(row['round_num']), target_window_size))
    forked[key] = value
  return forked
