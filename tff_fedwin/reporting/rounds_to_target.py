"""Rounds to a target accuracy: the speed-up claim of the IMA paper.

The IMA paper measures speed-up as the rounds a method needs until its test
accuracy first reaches the final accuracy of the baseline (the same
algorithm without IMA). Here, per seed, the target is the baseline run's
final accuracy as the tables report it: the mean of its last N evals
(`summary.json`). `first_round_reaching` finds the first eval round of a run
at or above it, and `rounds_to_target_table` puts every row of an experiment
next to its baseline, paired by seed.
"""

from collections.abc import Mapping, Sequence
import json
import os
from typing import Optional

import numpy as np

from tff_fedwin.reporting import plots
from tff_fedwin.training import outputs

# Accuracies within this of the target count as reaching it.
_TOLERANCE = 1e-9


def first_round_reaching(curve: plots.Curve, target: float) -> Optional[int]:
  """The first eval round whose value is >= `target`; None if none is.

  Args:
    curve: `(rounds, values)` of one run, rounds ascending.
    target: The accuracy to reach.
  """
  rounds, values = curve
  # A mean of equal evals can exceed each of them by an ulp: allow it.
  reached = np.flatnonzero(np.asarray(values) >= target - _TOLERANCE)
  return int(rounds[reached[0]]) if reached.size else None


def final_accuracy(run_dir: str) -> float:
  """The run's final accuracy: `window` mean of its last N evals.

  Without a window, and in broadcast mode, the window model is the global
  model, so this is the accuracy of the model the run ends with.
  """
  with open(os.path.join(run_dir, 'summary.json')) as f:
    summary = json.load(f)
  return float(summary[outputs.WINDOW_PREFIX]['accuracy']['mean'])


def _cell(values: Sequence[Optional[float]], fmt: str) -> str:
  """mean +- std (population) of the values, or a note of the misses."""
  missed = sum(v is None for v in values)
  if missed:
    return f'not reached in {missed} of {len(values)} seeds'
  return f'{np.mean(values):{fmt}} +- {np.std(values):{fmt}}'


def rounds_to_target_table(
    rows: Mapping[str, Sequence[str]], baseline: str
) -> list[str]:
  """Markdown rows: per row, rounds to the baseline's final accuracy.

  Args:
    rows: {row label: run directories, one per seed, in seed order}.
    baseline: The label of the baseline row; its runs give each seed's
      target (`final_accuracy`).

  Returns:
    A header and one line per row: the per-seed rounds, their mean +- std,
    and the speed-up (baseline's rounds / the row's, per seed, then mean +-
    std). A row that never reaches the target in some seed says so.

  Raises:
    ValueError: If `baseline` is not a row or the rows' seed counts differ.
  """
  if baseline not in rows:
    raise ValueError(f'baseline {baseline!r} is not one of {list(rows)}.')
  seeds = len(rows[baseline])
  if any(len(dirs) != seeds for dirs in rows.values()):
    raise ValueError(f'every row needs {seeds} runs (one per seed).')
  targets = [final_accuracy(d) for d in rows[baseline]]

  def reached(run_dir, target):
    curve = plots.read_eval_curves(
        run_dir, 'accuracy', [outputs.WINDOW_PREFIX]
    )[outputs.WINDOW_PREFIX]
    return first_round_reaching(curve, target)

  base_rounds = [reached(d, t) for d, t in zip(rows[baseline], targets)]
  lines = [
      f'| row | rounds to the final accuracy of {baseline!r}, per seed | '
      'mean | speed-up (per seed ratio) |',
      '|---|---|---:|---:|',
  ]
  for label, dirs in rows.items():
    row_rounds = [reached(d, t) for d, t in zip(dirs, targets)]
    speedups = [
        None if r is None or b is None else b / r
        for b, r in zip(base_rounds, row_rounds)
    ]
    per_seed = ', '.join('-' if r is None else str(r) for r in row_rounds)
    lines.append(
        f'| {label} | {per_seed} | {_cell(row_rounds, ".1f")} | '
        f'{_cell(speedups, ".2f")} |'
    )
  return lines
