"""The progress lines a run prints: round, time, ETA and eval metrics."""

import datetime
import math
import time
from collections.abc import Mapping

import numpy as np

from tff_fedwin.training import outputs

# Rounds without an eval print a progress line at most this often.
PROGRESS_INTERVAL_SECONDS = 30.0


def format_seconds(seconds: float) -> str:
  """`h:mm:ss`, rounded to the second."""
  return str(datetime.timedelta(seconds=round(seconds)))


def print_line(message: str) -> None:
  """Prints `message` to stdout at once."""
  print(message, flush=True)


def eval_text(values: Mapping[str, float], *, show_window: bool = True) -> str:
  """`, window/accuracy 0.9000, ...` of a row's eval columns, or ''.

  The window (if `show_window`: without a window its columns repeat the
  global model's), global and (IMA) aggregate models' columns; not the extra
  windows' or the per-client spread's.
  """
  prefixes = (outputs.GLOBAL_PREFIX, outputs.AGGREGATE_PREFIX)
  if show_window:
    prefixes = (outputs.WINDOW_PREFIX,) + prefixes
  starts = tuple(prefix + '/' for prefix in prefixes)
  parts = [f'{k} {v:.4f}' for k, v in values.items() if k.startswith(starts)]
  return (', ' + ', '.join(parts)) if parts else ''


class ProgressPrinter:
  """Prints the progress lines of one run.

  A line for the first round, for every eval round, and otherwise at most
  every `PROGRESS_INTERVAL_SECONDS`; `window/` figures only if `show_window`.
  """

  def __init__(
      self,
      *,
      experiment_name: str,
      first_round: int,
      total_rounds: int,
      show_window: bool = True,
  ):
    self._name = experiment_name
    self._show_window = show_window
    self._first_round = first_round
    self._total_rounds = total_rounds
    self._iteration_times = []
    self._last_line = -math.inf

  def round_done(
      self,
      *,
      round_num: int,
      round_time: float,
      iteration_time: float,
      values: Mapping[str, float],
  ) -> None:
    """Records a finished round; prints its line if one is due."""
    self._iteration_times.append(iteration_time)
    eta = np.mean(self._iteration_times) * (self._total_rounds - round_num)
    evaluated = eval_text(values, show_window=self._show_window)
    if (
        evaluated
        or round_num == self._first_round
        or (time.monotonic() - self._last_line >= PROGRESS_INTERVAL_SECONDS)
    ):
      print_line(
          f'{self._name}: round {round_num}/{self._total_rounds} '
          f'{round_time:.2f}s, ETA {format_seconds(eta)}{evaluated}'
      )
      self._last_line = time.monotonic()
