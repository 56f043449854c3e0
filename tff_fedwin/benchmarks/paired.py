"""A row and its own bound measured round by round, alternately.

Ratios of rows measured minutes apart carry this shared machine's drift
(single runs of the same row differ by 10-20%). Here a row's TFF worker and
its bound's in-process `tf.function` are both prepared, then their rounds
alternate (row, bound, bound, row, ...), and each pair of adjacent rounds
gives one ratio: the two sides of a ratio see the same seconds of the
machine. Used by `scripts/benchmark.py --paired` (docs/design.md sec. 7.4).
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

from tff_fedwin import runtime
from tff_fedwin.benchmarks import rounds
from tff_fedwin.benchmarks import stepped


class PairResult(NamedTuple):
  """The alternated rounds of one row and its own bound, in seconds."""

  name: str
  row_seconds: list[float]
  bound_seconds: list[float]

  @property
  def ratios(self) -> list[float]:
    return [r / b for r, b in zip(self.row_seconds, self.bound_seconds)]


def measure_pair(
    row: stepped.Rounds, bound: stepped.Rounds, num_pairs: int
) -> tuple[list[float], list[float]]:
  """`(row seconds, bound seconds)` of `num_pairs` alternated rounds each.

  Pair k times the row first for even k and the bound first for odd k, so
  neither side always runs after the other.
  """
  row_seconds, bound_seconds = [], []
  for k in range(num_pairs):
    if k % 2 == 0:
      row_seconds.append(stepped.time_round(row))
      bound_seconds.append(stepped.time_round(bound))
    else:
      bound_seconds.append(stepped.time_round(bound))
      row_seconds.append(stepped.time_round(row))
  return row_seconds, bound_seconds


def run_pairs(
    rows: Sequence[Any],
    data: Any,
    num_pairs: int,
    log: Callable[[str], None] = print,
) -> list[PairResult]:
  """Measures every row that has an own bound against it, alternately.

  Args:
    rows: `rounds.Row`s; each row with an `own_bound` must be stepped
      (`run` a `stepped.SteppedRow`, as the row of that bound), and runs on
      one fresh local TFF worker (the bound in this process).
    data: The clients' datasets.
    num_pairs: Alternated rounds of each side (>= 1).
    log: Where each pair's figures go as they are measured.

  Raises:
    ValueError: If `num_pairs` < 1, or a row or its bound is not stepped.
  """
  if num_pairs < 1:
    raise ValueError(f'`num_pairs` must be >= 1, got {num_pairs}.')
  by_name = {r.name: r for r in rows}
  results = []
  for row in rows:
    if not row.own_bound:
      continue
    bound = by_name[row.own_bound]
    for r in (row, bound):
      if not isinstance(r.run, stepped.SteppedRow):
        raise ValueError(f'Row {r.name!r} cannot be stepped round by round.')
    with runtime.local_execution_context():
      row_rounds = row.run.rounds(data)
      try:
        bound_rounds = bound.run.rounds(data)
        try:
          seconds = measure_pair(row_rounds, bound_rounds, num_pairs)
        finally:
          bound_rounds.close()
      finally:
        row_rounds.close()
    results.append(PairResult(row.name, *seconds))
    log(
        f'{row.name}: x own bound {rounds.median_and_range(results[-1].ratios)}'
    )
  return results


def markdown_table(results: Sequence[PairResult], header: str) -> str:
  """One line per row: s/round of both sides and the ratio, median (range)."""
  lines = [
      header,
      '',
      '| process | s/round | own bound s/round | x own bound |',
      '|---|---:|---:|---:|',
  ]
  for r in results:
    lines.append(
        f'| {r.name} | {rounds.median_and_range(r.row_seconds)} | '
        f'{rounds.median_and_range(r.bound_seconds)} | '
        f'{rounds.median_and_range(r.ratios)} |'
    )
  return '\n'.join(lines)


def run_and_report(
    rows: Sequence[Any],
    *,
    num_pairs: int,
    clients: int,
    steps: int,
    batch_size: int,
    output: Optional[str] = None,
) -> str:
  """`run_pairs` on synthetic EMNIST clients; prints and returns the table."""
  data = rounds.synthetic_emnist_data(clients, steps, batch_size)
  table = markdown_table(
      run_pairs(rows, data, num_pairs),
      f'EMNIST-62 cnn_dropout (1.2M params); {clients} clients x {steps} '
      f'steps of batch {batch_size}; each row on a fresh TFF worker, its '
      f"rounds alternated with its own bound's, {num_pairs} pairs after one "
      'warm-up round each; medians (min-max) over the pairs, each ratio '
      'within a pair.',
  )
  print(table, flush=True)
  if output:
    with open(output, 'w') as f:
      f.write(table + '\n')
  return table
