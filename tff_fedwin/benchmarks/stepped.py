"""A benchmark row as prepared rounds that can be stepped one at a time.

A `RoundsFn` prepares a row on the clients' data (builds the process or the
bound, runs the untimed warm-up round) and returns `Rounds`, whose `next()`
runs one more round. `SteppedRow` times such a row as a `rounds.RowFn`;
`benchmarks.paired` alternates the rounds of a row and of its own bound, so
that both see the same moments of this shared machine.
"""

import time
from collections.abc import Callable
from typing import Any, NamedTuple


class Rounds(NamedTuple):
  """A prepared row (its warm-up round done).

  Attributes:
    next: `() -> None`, runs one round.
    state_mb: `() -> float`, the size of what the row keeps between rounds.
    close: `() -> None`, frees what the row holds outside Python (files).
  """

  next: Callable[[], None]
  state_mb: Callable[[], float]
  close: Callable[[], None] = lambda: None


# (the clients' datasets) -> Rounds.
RoundsFn = Callable[[Any], Rounds]


class SteppedRow(NamedTuple):
  """A `rounds.RowFn` of a `RoundsFn`: `(data, num_rounds) -> (s, MB)`.

  Prepares the rounds (warm-up included), times `num_rounds` calls of
  `next` and closes them. `rounds` stays reachable for `benchmarks.paired`.
  """

  rounds: RoundsFn

  def __call__(self, data: Any, num_rounds: int) -> tuple[float, float]:
    prepared = self.rounds(data)
    try:
      seconds = sum(time_round(prepared) for _ in range(num_rounds))
      return seconds / num_rounds, prepared.state_mb()
    finally:
      prepared.close()


def time_round(rounds: Rounds) -> float:
  """Seconds taken by one `rounds.next()`."""
  start = time.perf_counter()
  rounds.next()
  return time.perf_counter() - start
