"""The window kept by the training program instead of the process state.

`ProgramWindow` keeps the last W models next to the round loop: a float64
running sum in the program state (saved with each checkpoint) and each round's
model in a file (`RoundModelFiles`), O(model size) per round whatever W is.
Why, and the extra window sizes: docs/design.md secs. 1.10, 1.11.
"""

import collections
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_fedwin import errors
from tff_fedwin.aggregators import round_model_files
from tff_fedwin.aggregators import window_math


class ProgramWindowState(NamedTuple):
  """The part of the window saved in the program state.

  Attributes:
    num_models: int64 scalar, the models pushed so far (= rounds done), t.
    window_sizes: int64 vector (W, *extra window sizes): which sum is which,
      checked when a window continues from a saved state.
    window_sum: A structure like the trainable weights, float64:
      sum_{k=0}^{min(t, W)-1} w^{t-k}.
    extra_sums: A tuple of such sums, one per extra window size, in the
      order of `ProgramWindow.extra_window_sizes`.
  """

  num_models: Any
  window_sizes: Any
  window_sum: Any
  extra_sums: tuple[Any, ...]


class WindowSizesMismatchError(errors.RunDirectoryError, ValueError):
  """A saved window state was kept for other window sizes than this one's."""


class ProgramWindow:
  """The window of the last W models, in a running sum and one file a round.

  m^t = (1/W) sum_{k<W} w^{t-k} (WiMA Eq. 4), with the semantics of the
  window in the process state (docs/design.md secs. 1.1-1.3, 1.10). Extra
  window sizes W' are evaluated only (sec. 1.11); methods take
  `window_size=W'` for them.
  """

  def __init__(
      self,
      *,
      window_size: int,
      mode: str = 'evaluate',
      start_round: int = 0,
      read_every: int = 1,
      extra_window_sizes: Sequence[int] = (),
  ):
    """Initializes the window.

    Args:
      window_size: W >= 1.
      mode: `'evaluate'` (WiMA) or `'broadcast'` (IMA).
      start_round: Active from round max(W, start_round).
      read_every: E >= 1: active only at rounds t % E == 0; 1 in
        `'broadcast'` mode.
      extra_window_sizes: More window sizes to keep over the same models,
        distinct ints >= 1 other than `window_size`.

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
    self.extra_window_sizes = window_math.checked_extra_window_sizes(
        extra_window_sizes, window_size
    )
    self.largest_window_size = max((window_size, *self.extra_window_sizes))
    self._files = None

  # The window's arithmetic (numpy, pure functions of the state).

  def initial_state(self, trainable: Any) -> ProgramWindowState:
    """An empty window for models shaped like `trainable`."""
    return ProgramWindowState(
        num_models=np.int64(0),
        window_sizes=self._sizes(),
        window_sum=_zeros(trainable),
        extra_sums=tuple(_zeros(trainable) for _ in self.extra_window_sizes),
    )

  def _sizes(self) -> np.ndarray:
    return np.array((self.window_size, *self.extra_window_sizes), np.int64)

  def check_state(self, state: ProgramWindowState) -> None:
    """Raises `WindowSizesMismatchError` unless `state` has this window's sizes.

    The running sums are kept by position: a state saved with other sizes
    (or another order) would give wrong means without any other error.
    """
    saved = [int(w) for w in np.reshape(state.window_sizes, [-1])]
    if saved != self._sizes().tolist() or len(state.extra_sums) != len(
        self.extra_window_sizes
    ):
      raise WindowSizesMismatchError(
          f'The saved window state keeps window sizes {saved} (window_size, '
          f'then extra_window_sizes); this window has '
          f'{self._sizes().tolist()}. Continue with the same sizes in the same '
          'order (--window_size, --window_sizes) or start a new run.'
      )

  def _sum(self, state: ProgramWindowState, window_size: Optional[int]):
    """(W, the running sum of the last W models) of `window_size` (None: W)."""
    if window_size is None or window_size == self.window_size:
      return self.window_size, state.window_sum
    if window_size not in self.extra_window_sizes:
      raise ValueError(
          f'window_size {window_size} is neither the window size '
          f'({self.window_size}) nor one of extra_window_sizes '
          f'{list(self.extra_window_sizes)}.'
      )
    index = self.extra_window_sizes.index(window_size)
    return window_size, state.extra_sums[index]

  def is_active(
      self, state: ProgramWindowState, window_size: Optional[int] = None
  ) -> bool:
    """Whether m^t is the window model at t = `state.num_models`."""
    size, _ = self._sum(state, window_size)
    return window_math.is_active_round(
        int(state.num_models),
        window_size=size,
        start_round=self.start_round,
        read_every=self.read_every,
    )

  def sends_mean(self, state: ProgramWindowState) -> bool:
    """Whether the clients start the next round from m^t (IMA, active)."""
    return self.mode == 'broadcast' and self.is_active(state)

  def mean(
      self,
      state: ProgramWindowState,
      like: Any,
      window_size: Optional[int] = None,
  ) -> Any:
    """m^t = window_sum / W, in the dtypes of `like` (WiMA Eq. 4)."""
    size, window_sum = self._sum(state, window_size)
    return tf.nest.map_structure(
        lambda s, x: (s / size).astype(np.asarray(x).dtype), window_sum, like
    )

  def newest_model(self, state: ProgramWindowState, like: Any) -> Any:
    """w^t of t = `state.num_models` (read from its file), or `like` at t = 0.

    The round's model as pushed, before an IMA round replaced it by m^t.

    Raises:
      ValueError: If the window's files are not open (`open_files`).
    """
    files = self._open_files()
    if int(state.num_models) == 0:
      return like
    return files.read(int(state.num_models))

  def window_model(
      self,
      state: ProgramWindowState,
      trainable: Any,
      window_size: Optional[int] = None,
  ) -> Any:
    """m^t when active, else `trainable` (w^t)."""
    if self.is_active(state, window_size):
      return self.mean(state, trainable, window_size)
    return trainable

  def measurements(
      self,
      state: ProgramWindowState,
      trainable: Any,
      window_model: Optional[Any] = None,
      window_size: Optional[int] = None,
  ) -> collections.OrderedDict:
    """The window's fill, activity and ||window model - w^t||_2.

    `window_model`: `self.window_model(state, trainable, window_size)` if
    the caller has it already (so the mean is not computed twice in a round).
    """
    size, _ = self._sum(state, window_size)
    if window_model is None:
      window_model = self.window_model(state, trainable, size)
    return window_math.window_measurements_numpy(
        num_models=int(state.num_models),
        window_size=size,
        active=self.is_active(state, size),
        window_model=window_model,
        model=trainable,
    )

  def push(
      self, state: ProgramWindowState, trainable: Any
  ) -> ProgramWindowState:
    """Adds w^t of round t = num_models + 1 to each window; drops w^{t-W}.

    Args:
      state: The window after round t - 1.
      trainable: w^t, a structure like the state's sum.

    Returns:
      The window after round t.

    Raises:
      ValueError: If the window's files are not open (`open_files`).
    """
    files = self._open_files()
    self.check_state(state)
    round_num = int(state.num_models) + 1
    files.write(round_num, trainable)

    def pushed(size, window_sum):
      window_sum = tf.nest.map_structure(
          lambda s, x: s + np.asarray(x, np.float64), window_sum, trainable
      )
      if round_num > size:
        leaving = files.read(round_num - size)
        window_sum = tf.nest.map_structure(
            lambda s, x: s - x.astype(np.float64), window_sum, leaving
        )
      return window_sum

    return ProgramWindowState(
        np.int64(round_num),
        state.window_sizes,
        pushed(self.window_size, state.window_sum),
        tuple(
            pushed(size, window_sum)
            for size, window_sum in zip(
                self.extra_window_sizes, state.extra_sums
            )
        ),
    )

  # The files and the loop's checkpoint steps.

  def _open_files(self) -> round_model_files.RoundModelFiles:
    """The open round-model files; ValueError if `open_files` was not called."""
    if self._files is None:
      raise ValueError(
          'The ProgramWindow has no files: call `open_files(directory, '
          'round_num)` first (run_training does).'
      )
    return self._files

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
    needed = range(max(1, last - self.largest_window_size + 1), last + 1)
    files.open(directory, round_num, needed)
    self._files = files
    return self

  def prepare_checkpoint(self, round_num: int) -> None:
    """Makes the round models up to t durable, before the program state."""
    self._files.prepare_checkpoint(round_num)

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int]
  ) -> None:
    """Deletes the models of rounds <= r - max W, r the oldest kept nonzero
    checkpoint (docs/design.md secs. 1.10, 5.3)."""
    oldest = min([k for k in kept_rounds if 0 < k < round_num] + [round_num])
    self._files.delete_through(oldest - self.largest_window_size)

  def checkpoint_files(self, round_num: int) -> dict[str, list[str]]:
    """The models of rounds t - W + 1..t: the window of checkpoint t."""
    first = max(1, round_num - self.largest_window_size + 1)
    return {'files': [self._files.path(r) for r in range(first, round_num + 1)]}

  def close(self) -> None:
    if self._files is not None:
      self._files.close()
    self._files = None


def _zeros(trainable: Any) -> Any:
  return tf.nest.map_structure(
      lambda x: np.zeros(np.shape(x), np.float64), trainable
  )
