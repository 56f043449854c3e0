r"""Overlays the eval curves of several runs in one PNG (the papers' Figure 1).

Each run directory (`--root_output_dir/--experiment_name` of
run_experiment.py) contributes one line per curve: the window model solid, the
plain global model dashed; x is the round, y the metric on the eval rounds.

  .venv/bin/python scripts/plot_runs.py \
      --run_dirs=/tmp/runs/fedavg,/tmp/runs/wima \
      --labels='fedavg,fedavg+WiMA W=10' --output=/tmp/fig1.png

The reading and plotting live in `tff_fedwin.reporting.plots`.
"""

import sys

from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags

# tff_fedwin.reporting.plots imports TFF (through tff_fedwin.training); the
# runtime releases TFF's default context at exit, so the exit prints no
# `ServiceManager.__del__` traceback.
from tff_fedwin import runtime  # pylint: disable=unused-import
from tff_fedwin.reporting import plots

# pylint: enable=g-import-not-at-top,wrong-import-position

_RUN_DIRS = flags.DEFINE_list(
    'run_dirs',
    None,
    'Comma-separated run directories, each with a ' 'metrics.csv.',
)
_LABELS = flags.DEFINE_list(
    'labels',
    None,
    'Optional comma-separated legend labels, one per run '
    "directory; default: the directories' names.",
)
_METRIC = flags.DEFINE_string(
    'metric',
    'accuracy',
    'Eval metric to plot: the columns '
    '<curve>/<metric> of metrics.csv (e.g. accuracy, loss).',
)
_CURVES = flags.DEFINE_list(
    'curves',
    list(plots.CURVES),
    'Comma-separated curves to draw per run, '
    f'from {",".join(plots.CURVES)}.',
)
_OUTPUT = flags.DEFINE_string('output', None, 'PNG file to write.')
_TITLE = flags.DEFINE_string(
    'title',
    None,
    'Figure title; default "<metric>: window vs. global ' 'model".',
)


def _check_flags() -> tuple[list[str], list[str], list[str]]:
  """Raises app.UsageError naming the first bad flag; (dirs, labels, curves)."""
  run_dirs = [d for d in (_RUN_DIRS.value or []) if d]
  if not run_dirs:
    raise app.UsageError('--run_dirs must name at least one run directory.')
  labels = _LABELS.value
  if labels is None or labels == []:
    labels = [plots.default_label(d) for d in run_dirs]
  elif len(labels) != len(run_dirs):
    raise app.UsageError(
        f'--labels has {len(labels)} label(s) but --run_dirs has '
        f'{len(run_dirs)} director(y/ies); give one label per run.'
    )
  elif not all(labels):
    raise app.UsageError(f'--labels has an empty label: {labels}.')
  metric = _METRIC.value
  if not metric or '/' in metric:
    raise app.UsageError(
        f'--metric must be a name without "/", e.g. accuracy, got {metric!r}.'
    )
  curves = _CURVES.value or []
  unknown = [c for c in curves if c not in plots.CURVES]
  if not curves or unknown or len(set(curves)) != len(curves):
    raise app.UsageError(
        f'--curves must be distinct names from {",".join(plots.CURVES)}, '
        f'got {",".join(curves) or "nothing"}.'
    )
  if not _OUTPUT.value:
    raise app.UsageError('--output (the PNG file to write) is required.')
  if not _OUTPUT.value.lower().endswith('.png'):
    raise app.UsageError(
        f'--output must be a .png file, got {_OUTPUT.value!r}.'
    )
  return run_dirs, labels, curves


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  run_dirs, labels, curves = _check_flags()
  runs = []
  for run_dir, label in zip(run_dirs, labels):
    try:
      runs.append(
          (label, plots.read_eval_curves(run_dir, _METRIC.value, curves))
      )
    except FileNotFoundError as e:
      raise app.UsageError(f'--run_dirs: {e}') from e
    except plots.MetricNotFoundError as e:
      raise app.UsageError(f'--metric: {e}') from e
    except ValueError as e:
      raise app.UsageError(f'--run_dirs: {e}') from e
  plots.plot_runs(
      runs,
      _OUTPUT.value,
      metric=_METRIC.value,
      curves=curves,
      title=_TITLE.value,
  )
  print(f'Wrote {_OUTPUT.value}', flush=True)


if __name__ == '__main__':
  log_levels.run(main)
