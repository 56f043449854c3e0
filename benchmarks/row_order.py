"""Which benchmark rows run, and in which order in each repeat.

`select` keeps the rows a researcher asks for by name, with the references
their ratios need. `run_order` alternates the order of the repeats (forward,
backward, forward, ...): this shared machine's speed drifts over the minutes
a list of rows takes, and a row measured after its reference in every run
would carry that drift into its ratio one way (docs/performance.md sec. 1).
Without TensorFlow, so a script checks `--rows` before its heavy imports.
"""

import re
from collections.abc import Sequence
from typing import Any

from tff_fedwin import choices

# The bound's row (`rounds.bound_row`), a reference of every table.
BOUND_NAME = 'bound: same FedAvg arithmetic, one tf.function over tensors'
# scripts/benchmark.py --model_family (known before TensorFlow is imported).
MODEL_FAMILIES = choices.BENCHMARK_MODEL_FAMILIES


def select(
    rows: Sequence[Any], pattern: str, references: Sequence[str]
) -> list[Any]:
  """The rows whose name matches `pattern`, with the rows their ratios need.

  Kept, in the original order: every row whose `name` `re.search`es
  `pattern`, every row named in `references` (TFF's baseline and the bound,
  wherever they appear, so the baseline stays first and last), and the
  `own_bound` row of every row kept.

  Args:
    rows: `rounds.Row`s (anything with `name` and `own_bound`).
    pattern: A Python regular expression, searched in each row's name.
    references: Names of rows every table needs.

  Returns:
    The kept rows, a list.

  Raises:
    ValueError: Naming `--rows`, if `pattern` is no regular expression or
      matches no row.
  """
  try:
    regex = re.compile(pattern)
  except re.error as e:
    raise ValueError(
        f'--rows must be a Python regular expression; {pattern!r}: {e}.'
    ) from e
  chosen = {r.name for r in rows if regex.search(r.name)}
  if not chosen:
    names = '; '.join(dict.fromkeys(r.name for r in rows))
    raise ValueError(f'--rows={pattern!r} matches no row; rows: {names}.')
  chosen |= {r.own_bound for r in rows if r.name in chosen and r.own_bound}
  chosen |= set(references)
  return [r for r in rows if r.name in chosen]


def run_order(num_rows: int, repeat: int) -> list[int]:
  """The indices of the rows in the order repeat `repeat` (0-based) runs them.

  Even repeats run forward, odd ones backward, so that over an even number of
  repeats every pair of rows is measured as often in one order as in the
  other.
  """
  order = list(range(num_rows))
  return order if repeat % 2 == 0 else order[::-1]
