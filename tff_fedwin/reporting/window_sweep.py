"""The W sweep of one trajectory: each window's accuracy at several horizons.

A run with several windows (`--window_size=W --window_sizes=...`,
docs/design.md sec. 1.11) records, per eval round, the accuracy of the global
model (`global/`), of its main window (`window/`) and of each extra window
(`window_<W>/`). `window_accuracies` reads them as {W: curve}; `horizon_table`
summarizes several seeds' runs the way RESULTS.md does, at several horizons:
per seed the mean over the last N evals up to the horizon round, then mean
+- std (population) over seeds, and the best W of each seed.
`paired_difference_table` and `gain_table` judge each W against the best W
and against the global model by the rule of `tff_fedwin.reporting.paired`.
"""

from collections.abc import Sequence
import csv
import os
from typing import Optional

import numpy as np

from tff_fedwin.reporting import paired
from tff_fedwin.reporting import plots
from tff_fedwin.training import outputs

# The no-window row of the table (the global model).
GLOBAL_ROW = 0


def recorded_window_sizes(run_dir: str) -> list[int]:
  """The extra window sizes with columns in `<run_dir>/metrics.csv`."""
  with open(plots.metrics_csv_path(run_dir), newline='') as f:
    header = next(csv.reader(f), [])
  sizes = set()
  for column in header:
    prefix = column.split('/', 1)[0]
    match = outputs.EXTRA_WINDOW_PREFIX.fullmatch(prefix)
    if match and '/' in column:
      sizes.add(int(match.group(1)))
  return sorted(sizes)


def window_accuracies(
    run_dir: str, window_size: int, metric: str = 'accuracy'
) -> dict[int, plots.Curve]:
  """{W: (rounds, values)} of every window of a run; `GLOBAL_ROW`: global.

  Args:
    run_dir: A run directory with `metrics.csv`.
    window_size: The run's `--window_size` (its `window/` columns).
    metric: The eval metric.
  """
  extra = recorded_window_sizes(run_dir)
  names = [outputs.GLOBAL_PREFIX, outputs.WINDOW_PREFIX]
  names += [f'{outputs.WINDOW_PREFIX}_{w}' for w in extra]
  curves = plots.read_eval_curves(run_dir, metric, names)
  by_size = {GLOBAL_ROW: curves[outputs.GLOBAL_PREFIX]}
  by_size[window_size] = curves[outputs.WINDOW_PREFIX]
  for w in extra:
    by_size[w] = curves[f'{outputs.WINDOW_PREFIX}_{w}']
  return dict(sorted(by_size.items()))


def _last_evals(
    curve: plots.Curve,
    last_n: int,
    run: str,
    horizon: Optional[int] = None,
) -> np.ndarray:
  """The last `last_n` eval values at rounds <= `horizon` (None: all)."""
  rounds, values = curve
  if horizon is not None:
    values = values[rounds <= horizon]
  kept = values[-last_n:]
  if len(kept) < last_n:
    up_to, hint = '', '.'
    if horizon is not None:
      up_to = f' up to round {horizon}'
      hint = f' (a horizon past its first {last_n} evals).'
    raise ValueError(
        f'{run} has only {len(kept)} eval rounds{up_to}; the summary needs '
        f'{last_n}{hint}'
    )
  return kept


def mean_up_to(
    curve: plots.Curve, horizon: int, last_n: int, run: str = 'the run'
) -> float:
  """The mean of the last `last_n` eval values at rounds <= `horizon`."""
  return float(np.mean(_last_evals(curve, last_n, run, horizon)))


def _windows_of_runs(run_dirs, window_size):
  """(sizes, [{W: curve}] per run); every run must have the same windows."""
  if not run_dirs:
    raise ValueError('`run_dirs` must name at least one run.')
  per_run = [window_accuracies(d, window_size) for d in run_dirs]
  sizes = list(per_run[0])
  for d, run in zip(run_dirs, per_run):
    if list(run) != sizes:
      raise ValueError(f'{os.fspath(d)} has windows {list(run)}, not {sizes}.')
  return sizes, per_run


def _summaries(run_dirs, window_size, horizons, last_n):
  """(sizes, means [runs, sizes, horizons]) of the runs' windows."""
  sizes, per_run = _windows_of_runs(run_dirs, window_size)
  return sizes, np.array(
      [
          [
              [mean_up_to(run[w], h, last_n, os.fspath(d)) for h in horizons]
              for w in sizes
          ]
          for d, run in zip(run_dirs, per_run)
      ]
  )


def _mean_std(values) -> str:
  """'mean +- std' (population) of `values`, 4 decimals."""
  return f'{np.mean(values):.4f} +- {np.std(values):.4f}'


def _label(size: int) -> str:
  return 'none (global)' if size == GLOBAL_ROW else str(size)


def horizon_table(
    run_dirs: Sequence[str],
    window_size: int,
    horizons: Sequence[int],
    last_n: int,
) -> list[str]:
  """Markdown: per W a row of mean +- std over runs at each horizon.

  The last row gives each run's best W at each horizon (highest mean over
  the last `last_n` evals up to it; the global model counts as "none").

  Args:
    run_dirs: One run per seed, all with the same windows and eval rounds.
    window_size: The runs' `--window_size`.
    horizons: Rounds to summarize at, e.g. (120, 250, 500).
    last_n: Eval rounds per summary.
  """
  sizes, means = _summaries(run_dirs, window_size, horizons, last_n)
  lines = [
      '| W | '
      + ' | '.join(f'acc, last {last_n} evals to round {h}' for h in horizons)
      + ' |',
      '|---|' + '---:|' * len(horizons),
  ]
  for i, w in enumerate(sizes):
    cells = [_mean_std(means[:, i, j]) for j in range(len(horizons))]
    lines.append(f'| {_label(w)} | ' + ' | '.join(cells) + ' |')
  best = [
      ', '.join(
          str(sizes[int(np.argmax(means[r, :, j]))] or 'none')
          for r in range(len(means))
      )
      for j in range(len(horizons))
  ]
  lines.append('| best W per seed | ' + ' | '.join(best) + ' |')
  return lines


def _rule_cell(differences) -> str:
  """A paired difference over runs by `paired`'s rule, as a table cell."""
  return paired.format_difference(paired.paired_difference(differences))


def paired_difference_table(
    run_dirs: Sequence[str],
    window_size: int,
    horizons: Sequence[int],
    last_n: int,
) -> list[str]:
  """Markdown: each W minus the best W, paired per run, at each horizon.

  The best W of a horizon is the one with the highest mean over runs; a
  cell is (acc_W - acc_best) per run on the same trajectory, by the rule of
  `paired`: mean +- sample std [95% t interval], runs > 0: verdict. The
  best W's own cell is "0 (best)".
  """
  sizes, means = _summaries(run_dirs, window_size, horizons, last_n)
  best = np.argmax(means.mean(axis=0), axis=0)  # [horizons]
  lines = [
      '| W | '
      + ' | '.join(
          f'minus W = {_label(sizes[b])} to round {h}'
          for b, h in zip(best, horizons)
      )
      + ' |',
      '|---|' + '---:|' * len(horizons),
  ]
  for i, w in enumerate(sizes):
    cells = [
        '0 (best)' if i == b else _rule_cell(means[:, i, j] - means[:, b, j])
        for j, b in enumerate(best)
    ]
    lines.append(f'| {_label(w)} | ' + ' | '.join(cells) + ' |')
  return lines


def gain_table(
    run_dirs: Sequence[str],
    window_size: int,
    horizons: Sequence[int],
    last_n: int,
) -> list[str]:
  """Markdown: each W minus the global model, paired per run, per horizon.

  A cell is (acc_W - acc_global) per run on the same trajectory, by the
  rule of `paired` (as in `paired_difference_table`). Before round W a
  window is the global model, so a W > horizon has the difference 0 in
  every run ("within noise").
  """
  sizes, means = _summaries(run_dirs, window_size, horizons, last_n)
  g = sizes.index(GLOBAL_ROW)
  lines = [
      '| W | '
      + ' | '.join(f'W - global to round {h}' for h in horizons)
      + ' |',
      '|---|' + '---:|' * len(horizons),
  ]
  for i, w in enumerate(sizes):
    if i != g:
      cells = [
          _rule_cell(means[:, i, j] - means[:, g, j])
          for j in range(len(horizons))
      ]
      lines.append(f'| {_label(w)} | ' + ' | '.join(cells) + ' |')
  return lines


def window_table(
    run_dirs: Sequence[str], window_size: int, last_n: int
) -> list[str]:
  """Markdown: per W the summary columns of a one-window run, at the end.

  Per run, over its last `last_n` evals: the window's mean accuracy, that
  minus the global model's (paired: the same trajectory) and the window's
  std (smoothness); then mean +- std (population) over runs. These are the
  columns a run with only that window would report (evaluate mode: training
  does not depend on W), so one run per seed replaces one run per W.

  Args:
    run_dirs: One run per seed, all with the same windows and eval rounds.
    window_size: The runs' `--window_size`.
    last_n: Eval rounds per summary.
  """
  sizes, per_run = _windows_of_runs(run_dirs, window_size)
  spans = np.array(
      [
          [_last_evals(run[w], last_n, os.fspath(d)) for w in sizes]
          for d, run in zip(run_dirs, per_run)
      ]
  )  # [runs, sizes, last_n]
  means, stds = spans.mean(axis=2), spans.std(axis=2)
  gains = means - means[:, [sizes.index(GLOBAL_ROW)]]
  lines = [
      f'| W | acc (last {last_n}) | W - global (paired) | smoothness |',
      '|---|---:|---:|---:|',
  ]
  for i, w in enumerate(sizes):
    gain = '' if w == GLOBAL_ROW else _mean_std(gains[:, i])
    lines.append(
        f'| {_label(w)} | {_mean_std(means[:, i])} | {gain} | '
        f'{_mean_std(stds[:, i])} |'
    )
  return lines
