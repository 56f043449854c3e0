"""Rows and their own bound measured round by round, interleaved.

Ratios of rows measured minutes apart carry this shared machine's drift
(single runs of the same row differ by 10-20%). Here the rows that share an
own bound are prepared together on one fresh TFF worker, with the bound's
in-process `tf.function`, and their rounds interleave: rows A, B, then the
bound; the bound, then B, A; and so on. Each cycle gives each row one ratio
to the bound's round of the same cycle, so a ratio's two sides, and the
rows of one group, see the same seconds of the machine. Used by
`scripts/benchmark.py --paired` (docs/performance.md sec. 1).
"""

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

from benchmarks import model_families
from benchmarks import rounds
from benchmarks import stepped
from tff_fedwin import runtime


class PairResult(NamedTuple):
  """The alternated rounds of one row and its own bound, in seconds."""

  name: str
  row_seconds: list[float]
  bound_seconds: list[float]

  @property
  def ratios(self) -> list[float]:
    return [r / b for r, b in zip(self.row_seconds, self.bound_seconds)]


def measure_group(
    rows: Sequence[stepped.Rounds], bound: stepped.Rounds, num_cycles: int
) -> tuple[list[list[float]], list[float]]:
  """`(seconds of each row, bound seconds)` of `num_cycles` cycles.

  Cycle k runs every row in order and then the bound for even k, the bound
  and then the rows in reverse order for odd k, so no round always runs
  after the same other one.
  """
  row_seconds = [[] for _ in rows]
  bound_seconds = []
  for k in range(num_cycles):
    order = list(enumerate(rows))
    if k % 2:
      bound_seconds.append(stepped.time_round(bound))
      order.reverse()
    for i, row in order:
      row_seconds[i].append(stepped.time_round(row))
    if k % 2 == 0:
      bound_seconds.append(stepped.time_round(bound))
  return row_seconds, bound_seconds


def _groups(rows: Sequence[Any]) -> list[tuple[Any, list[Any]]]:
  """`(bound row, [rows with that own bound])`, in the rows' order.

  Raises:
    ValueError: If a row of a group or its bound is not stepped.
  """
  by_name = {r.name: r for r in rows}
  groups = {}
  for row in rows:
    if row.own_bound:
      groups.setdefault(row.own_bound, []).append(row)
  for name, members in groups.items():
    for r in (*members, by_name[name]):
      if not isinstance(r.run, stepped.SteppedRow):
        raise ValueError(f'Row {r.name!r} cannot be stepped round by round.')
  return [(by_name[name], members) for name, members in groups.items()]


def run_pairs(
    rows: Sequence[Any],
    data: Any,
    num_pairs: int,
    log: Callable[[str], None] = print,
) -> list[PairResult]:
  """Measures every row that has an own bound against it, interleaved.

  Args:
    rows: `rounds.Row`s; each row with an `own_bound` must be stepped
      (`run` a `stepped.SteppedRow`, as the row of that bound). The rows of
      one bound run on one fresh local TFF worker (the bound in this
      process), prepared in the rows' order.
    data: The clients' datasets.
    num_pairs: Interleaved cycles (>= 1): rounds of each row and the bound.
    log: Where each row's figures go as they are measured.

  Raises:
    ValueError: If `num_pairs` < 1, or a row or its bound is not stepped.
  """
  if num_pairs < 1:
    raise ValueError(f'`num_pairs` must be >= 1, got {num_pairs}.')
  results = []
  for bound, members in _groups(rows):
    with runtime.local_execution_context(), contextlib.ExitStack() as stack:
      prepared = []
      for r in (*members, bound):
        prepared.append(r.run.rounds(data))
        stack.callback(prepared[-1].close)
      row_seconds, bound_seconds = measure_group(
          prepared[:-1], prepared[-1], num_pairs
      )
    for row, seconds in zip(members, row_seconds):
      results.append(PairResult(row.name, seconds, bound_seconds))
      log(
          f'{row.name}: x own bound '
          f'{rounds.median_and_range(results[-1].ratios)}'
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
    family: str = 'cnn',
) -> str:
  """`run_pairs` on synthetic clients; prints and returns the table.

  `family`: the model family the clients' data are for
  (`model_families.NAMES`; the rows must train its model).
  """
  model = model_families.family(family)
  data = model.client_data(clients, steps, batch_size)
  table = markdown_table(
      run_pairs(rows, data, num_pairs),
      f'{model.description}; {clients} clients x {steps} '
      f'steps of batch {batch_size}; the rows of one own bound on one fresh '
      "TFF worker, their rounds interleaved with their bound's (rows in "
      'order, bound; bound, rows in reverse), '
      f'{num_pairs} cycles after one warm-up round each; medians (min-max) '
      'over the cycles, each ratio within a cycle.',
  )
  print(table, flush=True)
  if output:
    with open(output, 'w') as f:
      f.write(table + '\n')
  return table
