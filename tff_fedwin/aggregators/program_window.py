"""The window kept by the training program instead of the process state.

A window in the process state crosses the Python boundary twice per round with
the state: W = 100 models of the 1.2M-parameter EMNIST CNN read every round are
470 MB of state and 8.6 GB of worker memory (docs/design.md sec. 7.2).
`ProgramWindow` keeps the same window next to the round loop (the program, in
`tff.program`'s terms): a float64 running sum of w^{t-W+1} .. w^t in the
program state, saved with each checkpoint, and each round's model in a file
(`RoundModelFiles`). A round adds w^t and subtracts w^{t-W}, read back from its
file: O(model size) in RAM, on disk and in time (docs/design.md sec. 1.10).
"""

import collections
from collections.abc import Collection
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_fedwin.aggregators import round_model_files
from tff_fedwin.aggregators import window_math


class ProgramWindowState(NamedTuple):
  """The part of the window saved in the program state.

  Attributes:
    num_models: int64 scalar, the models pushed so far (= rounds done), t.
    window_sum: A structure like the trainable weights, float64:
      sum_{k=0}^{min(t, W)-1} w^{t-k}.
  """

  num_models: Any
  window_sum: Any


class ProgramWindow:
  """The window of the last W models, in a running sum and one file a round.

  The same semantics as the window in the process state (docs/design.md
  sec. 1): the window model m^t = (1/W) sum_{k<W} w^{t-k} (WiMA Eq. 4) is
  active at rounds t >= max(W, start_round) with t % E == 0; in `'broadcast'`
  mode (IMA) the clients start the next round from it. The running sum is
  float64, so its rounding over thousands of rounds stays far below float32's
  (each add or subtract errs by at most 2^-53 of the sum).
  """

  def __init__(
      self,
      *,
      window_size: int,
      mode: str = 'evaluate',
      start_round: int = 0,
      read_every: int = 1,
  ):
    """Initializes the window.

    Args:
      window_size: W >= 1.
      mode: `'evaluate'` (WiMA) or `'broadcast'` (IMA).
      start_round: Active from round max(W, start_round).
      read_every: E >= 1: active only at rounds t % E == 0; 1 in
        `'broadcast'` mode.

    Raises:
      ValueError: If an argument is out of range (the message names it).
    """
    window_math.check_window_args(
        window_size=window_size,
        mode=mode,
        start_round=start_round,
        read_every=read_every,
    )
    self.window_size = window_size
    self.mode = mode
    self.start_round = start_round
    self.read_every = read_every
    self._files = None

  # The window's arithmetic (numpy, pure functions of the state).

  def initial_state(self, trainable: Any) -> ProgramWindowState:
    """An empty window for models shaped like `trainable`."""
    return ProgramWindowState(
        num_models=np.int64(0),
        window_sum=tf.nest.map_structure(
            lambda x: np.zeros(np.shape(x), np.float64), trainable
        ),
    )

  def is_active(self, state: ProgramWindowState) -> bool:
    """Whether m^t is the window model at t = `state.num_models`."""
    return window_math.is_active_round(
        int(state.num_models),
        window_size=self.window_size,
        start_round=self.start_round,
        read_every=self.read_every,
    )

  def sends_mean(self, state: ProgramWindowState) -> bool:
    """Whether the clients start the next round from m^t (IMA, active)."""
    return self.mode == 'broadcast' and self.is_active(state)

  def mean(self, state: ProgramWindowState, like: Any) -> Any:
    """m^t = window_sum / W, in the dtypes of `like` (WiMA Eq. 4)."""
    return tf.nest.map_structure(
        lambda s, x: (s / self.window_size).astype(np.asarray(x).dtype),
        state.window_sum,
        like,
    )

  def window_model(self, state: ProgramWindowState, trainable: Any) -> Any:
    """m^t when active, else `trainable` (w^t)."""
    if self.is_active(state):
      return self.mean(state, trainable)
    return trainable

  def measurements(
      self,
      state: ProgramWindowState,
      trainable: Any,
      window_model: Optional[Any] = None,
  ) -> collections.OrderedDict:
    """The window's fill, activity and ||window model - w^t||_2.

    `window_model`: `self.window_model(state, trainable)` if the caller has
    it already (so the mean is not computed twice in a round).
    """
    if window_model is None:
      window_model = self.window_model(state, trainable)
    squared = sum(
        float(np.sum(np.square(np.subtract(a, b, dtype=np.float64))))
        for a, b in zip(
            tf.nest.flatten(window_model), tf.nest.flatten(trainable)
        )
    )
    return collections.OrderedDict(
        window_fill=np.int32(min(int(state.num_models), self.window_size)),
        window_active=np.bool_(self.is_active(state)),
        window_distance=np.float32(np.sqrt(squared)),
    )

  def push(
      self, state: ProgramWindowState, trainable: Any
  ) -> ProgramWindowState:
    """Adds w^t of round t = num_models + 1; drops w^{t-W} (its file).

    Args:
      state: The window after round t - 1.
      trainable: w^t, a structure like the state's sum.

    Returns:
      The window after round t.

    Raises:
      ValueError: If the window's files are not open (`open_files`).
    """
    if self._files is None:
      raise ValueError(
          'The ProgramWindow has no files: call `open_files(directory, '
          'round_num)` first (run_training does).'
      )
    round_num = int(state.num_models) + 1
    self._files.write(round_num, trainable)
    window_sum = tf.nest.map_structure(
        lambda s, x: s + np.asarray(x, np.float64),
        state.window_sum,
        trainable,
    )
    if round_num > self.window_size:
      leaving = self._files.read(round_num - self.window_size)
      window_sum = tf.nest.map_structure(
          lambda s, x: s - x.astype(np.float64), window_sum, leaving
      )
    return ProgramWindowState(np.int64(round_num), window_sum)

  # The files and the loop's checkpoint steps.

  def open_files(
      self, directory: str, round_num: Optional[int], template: Any
  ) -> 'ProgramWindow':
    """Keeps the round models in `directory` from round `round_num` on.

    Args:
      directory: The window's directory (created 0700).
      round_num: The round of the checkpoint the run resumes from, or None
        for a fresh run.
      template: The trainable weights (shapes and dtypes).

    Returns:
      `self`, whose `prepare_checkpoint`, `finish_checkpoint` and `close` are
      the loop's checkpoint steps.

    Raises:
      MissingWindowModelsError: If a model the resumed window holds is
        missing.
      WindowFilesError: If `directory` holds other files.
    """
    files = round_model_files.RoundModelFiles(template)
    last = round_num or 0
    needed = range(max(1, last - self.window_size + 1), last + 1)
    files.open(directory, round_num, needed)
    self._files = files
    return self

  def prepare_checkpoint(self, round_num: int) -> None:
    """Makes the round models up to t durable, before the program state."""
    self._files.prepare_checkpoint(round_num)

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int]
  ) -> None:
    """Deletes the models of rounds <= t - W: a resume from t never reads them."""
    del kept_rounds  # Only the newest checkpoint is resumed from.
    self._files.delete_through(round_num - self.window_size)

  def close(self) -> None:
    if self._files is not None:
      self._files.close()
    self._files = None
