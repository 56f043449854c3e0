"""Eval curves of runs: read `metrics.csv`, overlay several runs in one PNG.

The papers' Figure 1: test accuracy per round of the window model and of the
plain global model, for one or more runs. A run directory is
`<root_output_dir>/<experiment_name>/` of `tff_fedwin.training.run_training`;
its `metrics.csv` has one row per round (key column `round_num`) and, on eval
rounds only, the columns `window/<metric>` and `global/<metric>` (empty cells
on the other rounds).

  curves = read_eval_curves('/tmp/runs/wima', 'accuracy')
  plot_runs([('fedavg+WiMA W=10', curves)], '/tmp/fig1.png', metric='accuracy')

Plots are drawn on a `matplotlib.figure.Figure` with the Agg canvas: no
display and no pyplot global state.
"""

import csv
import os
from collections.abc import Mapping, Sequence
from typing import Optional, Union

import matplotlib
from matplotlib import figure as figure_lib
from matplotlib.backends import backend_agg
import numpy as np

from tff_fedwin import errors
from tff_fedwin.training import outputs

# Curve name -> column prefix in metrics.csv, in plotting order.
CURVES = (outputs.WINDOW_PREFIX, outputs.GLOBAL_PREFIX)
# Line style of each curve; every run has one color for all its curves.
CURVE_LINESTYLES = {outputs.WINDOW_PREFIX: '-', outputs.GLOBAL_PREFIX: '--'}
# Lines with at most this many points also get a marker per eval round.
MAX_POINTS_WITH_MARKERS = 50

Curve = tuple[np.ndarray, np.ndarray]  # (rounds int64, values float64)
PathLike = Union[str, os.PathLike]


class MetricNotFoundError(errors.InputError):
  """The requested metric has no column in a run's `metrics.csv`."""


def metrics_csv_path(run_dir: PathLike) -> str:
  """`<run_dir>/metrics.csv`."""
  return os.path.join(os.fspath(run_dir), outputs.METRICS_CSV)


def _check_curves(
    curves: Sequence[str], extra_windows: bool = False
) -> tuple[str, ...]:
  """`curves` as a tuple; with `extra_windows`, `window_<W>` names too."""
  if isinstance(curves, str):
    raise ValueError(
        f'`curves` must be a sequence of names from {list(CURVES)}, got the '
        f'string {curves!r}.'
    )
  curves = tuple(curves)
  if not curves:
    raise ValueError(f'`curves` must name at least one of {list(CURVES)}.')
  unknown = [
      c
      for c in curves
      if c not in CURVES
      and not (extra_windows and outputs.EXTRA_WINDOW_PREFIX.fullmatch(c))
  ]
  if unknown:
    allowed = list(CURVES) + (['window_<W>'] if extra_windows else [])
    raise ValueError(
        f'Unknown curve(s) {unknown}: `curves` must be from {allowed}.'
    )
  if len(set(curves)) != len(curves):
    raise ValueError(f'`curves` has duplicates: {list(curves)}.')
  return curves


def _check_metric(metric: str) -> str:
  if not isinstance(metric, str) or not metric or '/' in metric:
    raise ValueError(
        f'`metric` must be a non-empty name without "/" (e.g. accuracy, '
        f'loss), got {metric!r}.'
    )
  return metric


def read_eval_curves(
    run_dir: PathLike,
    metric: str = 'accuracy',
    curves: Sequence[str] = CURVES,
) -> dict[str, Curve]:
  """The eval-round values of `<curve>/<metric>` in `<run_dir>/metrics.csv`.

  Rows whose cell for a curve is empty (non-eval rounds) are skipped; the
  rounds are sorted.

  Args:
    run_dir: A run directory (`<root_output_dir>/<experiment_name>`).
    metric: An eval metric name, e.g. `accuracy` or `loss`.
    curves: Which curves to read, from `CURVES` (`window`, `global`) or
      extra windows of the run (`window_<W>`, docs/design.md sec. 1.11).

  Returns:
    A dict, in the order of `curves`, of curve name to `(rounds, values)`:
    int64 and float64 arrays of the same length, at least one element.

  Raises:
    FileNotFoundError: If `<run_dir>/metrics.csv` does not exist.
    MetricNotFoundError: If a `<curve>/<metric>` column is missing (the
      message lists the eval metrics the file has).
    ValueError: If `metric` or `curves` is invalid, or the file has no header,
      no `round_num` column, a malformed cell, a round twice, or no eval
      round.
  """
  metric = _check_metric(metric)
  curves = _check_curves(curves, extra_windows=True)
  path = metrics_csv_path(run_dir)
  if not os.path.isfile(path):
    raise FileNotFoundError(
        f'No {outputs.METRICS_CSV} in run directory {os.fspath(run_dir)!r} '
        f'({path} does not exist).'
    )
  with open(path, newline='') as f:
    reader = csv.DictReader(f)
    fieldnames = reader.fieldnames or []
    if not fieldnames:
      raise ValueError(f'{path} is empty: no header row.')
    if outputs.ROUND_KEY not in fieldnames:
      raise ValueError(f'{path} has no {outputs.ROUND_KEY!r} column.')
    columns = {curve: f'{curve}/{metric}' for curve in curves}
    missing = [c for c in columns.values() if c not in fieldnames]
    if missing:
      available = sorted(
          {
              name.split('/', 1)[1]
              for name in fieldnames
              if name.split('/', 1)[0] in CURVES and '/' in name
          }
      )
      raise MetricNotFoundError(
          f'Metric {metric!r} not in {path}: no column(s) {missing}; its eval '
          f'metrics are {available}.'
      )
    rounds = {curve: [] for curve in curves}
    values = {curve: [] for curve in curves}
    for line_num, row in enumerate(reader, start=2):
      try:
        round_num = int(row[outputs.ROUND_KEY])
        for curve, column in columns.items():
          cell = (row.get(column) or '').strip()
          if cell:
            rounds[curve].append(round_num)
            values[curve].append(float(cell))
      except (TypeError, ValueError) as e:
        raise ValueError(f'{path}, line {line_num}: malformed row: {e}') from e
  result = {}
  for curve in curves:
    if not rounds[curve]:
      raise ValueError(
          f'{path} has no eval round with a {columns[curve]!r} value.'
      )
    curve_rounds = np.asarray(rounds[curve], dtype=np.int64)
    order = np.argsort(curve_rounds, kind='stable')
    curve_rounds = curve_rounds[order]
    repeated = curve_rounds[1:][curve_rounds[1:] == curve_rounds[:-1]]
    if repeated.size:
      raise ValueError(f'{path} has round {int(repeated[0])} more than once.')
    result[curve] = (
        curve_rounds,
        np.asarray(values[curve], dtype=np.float64)[order],
    )
  return result


def mean_curves(runs: Sequence[Mapping[str, Curve]]) -> dict[str, Curve]:
  """The pointwise mean over runs (e.g. seeds) of curves on the same rounds.

  Args:
    runs: One or more results of `read_eval_curves`, all with the same curve
      names and, per curve, the same eval rounds.

  Returns:
    A dict of curve name to `(rounds, mean values)`, in the first run's order.

  Raises:
    ValueError: If `runs` is empty, or the runs differ in their curve names
      or in the rounds of a curve.
  """
  runs = list(runs)
  if not runs:
    raise ValueError("`runs` must hold at least one run's curves.")
  names = list(runs[0])
  result = {}
  for i, run in enumerate(runs[1:], start=1):
    if list(run) != names:
      raise ValueError(
          f'`runs[{i}]` has curves {list(run)}, `runs[0]` has {names}.'
      )
  for name in names:
    rounds = np.asarray(runs[0][name][0])
    for i, run in enumerate(runs[1:], start=1):
      if not np.array_equal(np.asarray(run[name][0]), rounds):
        raise ValueError(
            f'`runs[{i}]` curve {name!r} has other eval rounds than '
            f'`runs[0]`: {list(run[name][0])} vs {list(rounds)}.'
        )
    values = np.mean(
        [np.asarray(run[name][1], np.float64) for run in runs], axis=0
    )
    result[name] = (rounds, values)
  return result


def default_label(run_dir: PathLike) -> str:
  """A run's label when none is given: the run directory's name."""
  return os.path.basename(os.path.normpath(os.fspath(run_dir)))


def plot_runs(
    runs: Sequence[tuple[str, Mapping[str, Curve]]],
    output_path: Optional[PathLike],
    *,
    metric: str = 'accuracy',
    curves: Sequence[str] = CURVES,
    title: Optional[str] = None,
    figsize: tuple[float, float] = (8.0, 5.0),
    dpi: int = 120,
) -> figure_lib.Figure:
  """Overlays the eval curves of runs in one figure and saves it as a PNG.

  Every run gets one color and one line per curve, labeled `<label>
  (<curve>)`: the window model solid, the global model dashed. x is the round,
  y the metric on the eval rounds.

  Args:
    runs: `(label, curves)` pairs, `curves` as from `read_eval_curves`.
    output_path: The PNG to write (its directory is created), or `None` to
      only return the figure.
    metric: The metric's name, for the y axis label.
    curves: Which curves of each run to draw, from `CURVES`.
    title: The figure title; default `<metric>: window vs. global model`.
    figsize: Figure size in inches.
    dpi: Resolution of the PNG.

  Returns:
    The `matplotlib.figure.Figure` (one Axes; its lines in the order run 1's
    curves, run 2's curves, ...).

  Raises:
    ValueError: If `runs` is empty, a label is not a non-empty string, a run
      lacks a requested curve, or a curve's rounds and values differ in
      length or are empty.
  """
  curves = _check_curves(curves)
  metric = _check_metric(metric)
  runs = list(runs)
  if not runs:
    raise ValueError('`runs` must hold at least one (label, curves) pair.')
  checked = []
  for i, run in enumerate(runs):
    if not isinstance(run, tuple) or len(run) != 2:
      raise ValueError(
          f'`runs[{i}]` must be a (label, curves) pair, got {run!r}.'
      )
    label, run_curves = run
    if not isinstance(label, str) or not label:
      raise ValueError(
          f'`runs[{i}]` label must be a non-empty string, got ' f'{label!r}.'
      )
    lines = []
    for curve in curves:
      if curve not in run_curves:
        raise ValueError(
            f'Run {label!r} has no {curve!r} curve (it has '
            f'{sorted(run_curves)}).'
        )
      x, y = (np.asarray(a) for a in run_curves[curve])
      if x.ndim != 1 or x.shape != y.shape or not x.size:
        raise ValueError(
            f'Run {label!r}, curve {curve!r}: rounds and values must be '
            f'non-empty 1-D arrays of one length, got shapes {x.shape} and '
            f'{y.shape}.'
        )
      lines.append((curve, x, y))
    checked.append((label, lines))

  fig = figure_lib.Figure(figsize=figsize, dpi=dpi)
  backend_agg.FigureCanvasAgg(fig)
  ax = fig.add_subplot()
  color_cycle = [p['color'] for p in matplotlib.rcParams['axes.prop_cycle']]
  for i, (label, lines) in enumerate(checked):
    color = color_cycle[i % len(color_cycle)]
    for curve, x, y in lines:
      marker = 'o' if x.size <= MAX_POINTS_WITH_MARKERS else None
      ax.plot(
          x,
          y,
          linestyle=CURVE_LINESTYLES[curve],
          color=color,
          marker=marker,
          markersize=3,
          linewidth=1.5,
          label=f'{label} ({curve})',
      )
  ax.set_xlabel('round')
  ax.set_ylabel(metric)
  ax.set_title(
      title if title is not None else f'{metric}: window vs. global model'
  )
  ax.grid(True, alpha=0.3)
  ax.xaxis.get_major_locator().set_params(integer=True)
  ax.legend(loc='best', fontsize='small')
  fig.tight_layout()
  if output_path is not None:
    output_path = os.fspath(output_path)
    directory = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(output_path, format='png')
  return fig
