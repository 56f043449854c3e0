"""Tests for tff_fedwin.reporting.plots and scripts/plot_runs.py.

Every test writes its own small metrics.csv (the layout of run_training's: a
`round_num` key column, training columns on every row, eval columns filled on
eval rounds only) with values chosen here, and checks the curves, the drawn
lines and the PNG against those values.
"""

import csv
import importlib.util
import os
import subprocess
import sys

from absl import app
from absl import flags
from matplotlib import colors as mcolors
import numpy as np
import pytest

from tff_fedwin.training import outputs
from tff_fedwin.reporting import plots

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_SCRIPT = os.path.join(_ROOT, 'scripts', 'plot_runs.py')
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'

_FIELDS = (
    'round_num',
    'round_time_seconds',
    'train/client_work/train/loss',
    'eval_time_seconds',
    'global/accuracy',
    'global/loss',
    'window/accuracy',
    'window/loss',
)

# Run A: 6 rounds, eval at 2, 4, 6. Run B: 5 rounds, eval at 2, 4, 5.
RUN_A = {
    2: {
        'window/accuracy': 0.5325,
        'window/loss': 1.25,
        'global/accuracy': 0.4295,
        'global/loss': 2.5,
    },
    4: {
        'window/accuracy': 0.6668,
        'window/loss': 1.0,
        'global/accuracy': 0.45,
        'global/loss': 2.75,
    },
    6: {
        'window/accuracy': 0.7125,
        'window/loss': 0.875,
        'global/accuracy': 0.6,
        'global/loss': 1.5,
    },
}
RUN_B = {
    2: {
        'window/accuracy': 0.25,
        'window/loss': 3.0,
        'global/accuracy': 0.125,
        'global/loss': 3.5,
    },
    4: {
        'window/accuracy': 0.375,
        'window/loss': 2.0,
        'global/accuracy': 0.3125,
        'global/loss': 2.25,
    },
    5: {
        'window/accuracy': 0.5,
        'window/loss': 1.75,
        'global/accuracy': 0.4375,
        'global/loss': 2.0,
    },
}


def _write_run(run_dir, total_rounds, evals, fields=_FIELDS, rows=None):
  """Writes run_dir/metrics.csv; returns run_dir as a str."""
  os.makedirs(run_dir, exist_ok=True)
  with open(os.path.join(run_dir, 'metrics.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(fields))
    writer.writeheader()
    for t in rows if rows is not None else range(1, total_rounds + 1):
      row = {
          'round_num': t,
          'round_time_seconds': 0.1 * t,
          'train/client_work/train/loss': 1.0 / t,
      }
      if t in evals:
        row['eval_time_seconds'] = 0.01
        row.update(evals[t])
      writer.writerow({k: v for k, v in row.items() if k in fields})
  return str(run_dir)


def _expected(evals, column):
  rounds = sorted(evals)
  return rounds, [evals[t][column] for t in rounds]


@pytest.fixture
def run_a(tmp_path):
  return _write_run(tmp_path / 'run_a', 6, RUN_A)


@pytest.fixture
def run_b(tmp_path):
  return _write_run(tmp_path / 'run_b', 5, RUN_B)


def test_constants_match_the_loop_outputs():
  assert (
      plots.CURVES
      == (outputs.WINDOW_PREFIX, outputs.GLOBAL_PREFIX)
      == ('window', 'global')
  )
  assert plots.metrics_csv_path('/r') == os.path.join('/r', outputs.METRICS_CSV)


@pytest.mark.parametrize('metric', ['accuracy', 'loss'])
def test_read_eval_curves_returns_the_eval_rows_only(run_a, metric):
  curves = plots.read_eval_curves(run_a, metric)
  assert list(curves) == ['window', 'global']
  for curve in ('window', 'global'):
    rounds, values = curves[curve]
    want_rounds, want_values = _expected(RUN_A, f'{curve}/{metric}')
    assert rounds.dtype == np.int64 and values.dtype == np.float64
    assert rounds.tolist() == want_rounds == [2, 4, 6]
    assert values.tolist() == want_values


def test_read_eval_curves_one_curve_and_the_last_round(run_b):
  curves = plots.read_eval_curves(run_b, 'accuracy', curves=['global'])
  assert list(curves) == ['global']
  rounds, values = curves['global']
  assert rounds.tolist() == [2, 4, 5]
  assert values.tolist() == [0.125, 0.3125, 0.4375]


def test_read_eval_curves_sorts_rounds(tmp_path):
  run_dir = _write_run(tmp_path / 'r', 4, RUN_A, rows=[4, 1, 6, 2])
  rounds, values = plots.read_eval_curves(run_dir)['window']
  assert rounds.tolist() == [2, 4, 6]
  assert values.tolist() == [0.5325, 0.6668, 0.7125]


def test_read_eval_curves_missing_csv(tmp_path):
  with pytest.raises(FileNotFoundError, match=r'No metrics\.csv in run'):
    plots.read_eval_curves(tmp_path / 'nowhere')


def test_read_eval_curves_unknown_metric_lists_the_available(run_a):
  with pytest.raises(
      plots.MetricNotFoundError, match=r"'acc'.*\['accuracy', 'loss'\]"
  ):
    plots.read_eval_curves(run_a, 'acc')


@pytest.mark.parametrize(
    'content, match',
    [
        ('', 'no header'),
        ('step,window/accuracy,global/accuracy\n1,0.5,0.5\n', "'round_num'"),
        (
            'round_num,window/accuracy,global/accuracy\n1,,\n2,,\n',
            'no eval round',
        ),
        (
            'round_num,window/accuracy,global/accuracy\n1,0.5,abc\n',
            'line 2: malformed',
        ),
        (
            'round_num,window/accuracy,global/accuracy\n2,0.5,0.5\n2,0.6,0.6\n',
            'round 2 more than once',
        ),
    ],
)
def test_read_eval_curves_bad_files(tmp_path, content, match):
  (tmp_path / 'metrics.csv').write_text(content)
  with pytest.raises(ValueError, match=match):
    plots.read_eval_curves(tmp_path)


@pytest.mark.parametrize(
    'kwargs, match',
    [
        ({'metric': 'window/accuracy'}, '`metric`'),
        ({'metric': ''}, '`metric`'),
        ({'curves': ['window', 'train']}, 'Unknown curve'),
        ({'curves': []}, 'at least one'),
        ({'curves': 'window'}, 'the string'),
        ({'curves': ['global', 'global']}, 'duplicates'),
    ],
)
def test_read_eval_curves_bad_arguments(run_a, kwargs, match):
  with pytest.raises(ValueError, match=match):
    plots.read_eval_curves(run_a, **kwargs)


def test_mean_curves_averages_seeds_pointwise(run_a, tmp_path):
  # A second seed on run A's eval rounds 2, 4, 6.
  seed1 = {
      t: {k: v / 2 for k, v in values.items()} for t, values in RUN_A.items()
  }
  run_a1 = _write_run(tmp_path / 'run_a1', 6, seed1)
  mean = plots.mean_curves(
      [plots.read_eval_curves(run_a), plots.read_eval_curves(run_a1)]
  )
  assert list(mean) == ['window', 'global']
  rounds, values = mean['window']
  np.testing.assert_array_equal(rounds, [2, 4, 6])
  # (v + v/2) / 2 = 0.75 v, e.g. round 2: 0.75 * 0.5325 = 0.399375.
  np.testing.assert_allclose(values, [0.399375, 0.5001, 0.534375])
  np.testing.assert_allclose(
      mean['global'][1], [0.75 * 0.4295, 0.75 * 0.45, 0.75 * 0.6]
  )


@pytest.mark.parametrize(
    'second, match',
    [
        ('other_rounds', 'other eval rounds'),
        ('one_curve', 'has curves'),
    ],
)
def test_mean_curves_errors(run_a, run_b, second, match):
  first = plots.read_eval_curves(run_a)
  other = (
      plots.read_eval_curves(run_b)
      if second == 'other_rounds'
      else plots.read_eval_curves(run_a, curves=['window'])
  )
  with pytest.raises(ValueError, match=match):
    plots.mean_curves([first, other])


def test_mean_curves_needs_a_run():
  with pytest.raises(ValueError, match='at least one'):
    plots.mean_curves([])


def test_plot_runs_writes_a_png_with_a_line_per_run_and_curve(
    run_a, run_b, tmp_path
):
  output = tmp_path / 'figs' / 'fig1.png'
  runs = [
      ('fedavg', plots.read_eval_curves(run_a)),
      ('fedavg+WiMA W=10', plots.read_eval_curves(run_b)),
  ]
  fig = plots.plot_runs(runs, output, metric='accuracy', title='Figure 1')

  with open(output, 'rb') as f:
    assert f.read(8) == _PNG_SIGNATURE
  assert os.path.getsize(output) > 1000
  (ax,) = fig.axes
  assert ax.get_title() == 'Figure 1'
  assert ax.get_xlabel() == 'round' and ax.get_ylabel() == 'accuracy'
  lines = ax.get_lines()
  assert [line.get_label() for line in lines] == [
      'fedavg (window)',
      'fedavg (global)',
      'fedavg+WiMA W=10 (window)',
      'fedavg+WiMA W=10 (global)',
  ]
  assert [line.get_linestyle() for line in lines] == ['-', '--', '-', '--']
  expected = [
      _expected(RUN_A, 'window/accuracy'),
      _expected(RUN_A, 'global/accuracy'),
      _expected(RUN_B, 'window/accuracy'),
      _expected(RUN_B, 'global/accuracy'),
  ]
  for line, (want_x, want_y) in zip(lines, expected):
    assert np.asarray(line.get_xdata()).tolist() == want_x
    assert np.asarray(line.get_ydata()).tolist() == want_y
  # One color per run, different runs differ.
  colors = [mcolors.to_hex(line.get_color()) for line in lines]
  assert colors[0] == colors[1] != colors[2] == colors[3]
  legend_texts = [t.get_text() for t in ax.get_legend().get_texts()]
  assert legend_texts == [line.get_label() for line in lines]


def test_plot_runs_one_curve_and_default_title(run_a, run_b, tmp_path):
  runs = [
      ('a', plots.read_eval_curves(run_a, 'loss')),
      ('b', plots.read_eval_curves(run_b, 'loss')),
  ]
  fig = plots.plot_runs(runs, None, metric='loss', curves=['global'])
  (ax,) = fig.axes
  assert ax.get_title() == 'loss: window vs. global model'
  assert [
      (line.get_label(), np.asarray(line.get_ydata()).tolist())
      for line in ax.get_lines()
  ] == [('a (global)', [2.5, 2.75, 1.5]), ('b (global)', [3.5, 2.25, 2.0])]
  assert not list(tmp_path.glob('*.png'))


@pytest.mark.parametrize(
    'runs, kwargs, match',
    [
        ([], {}, 'at least one'),
        ([('a', {'window': ([1], [0.5])})], {}, "no 'global' curve"),
        ([('', {'window': ([1], [0.5])})], {'curves': ['window']}, 'label'),
        (
            [('a', {'window': ([1, 2], [0.5])})],
            {'curves': ['window']},
            'one length',
        ),
        ([('a', {'window': ([], [])})], {'curves': ['window']}, 'non-empty'),
        (
            [('a', {'window': ([1], [0.5])})],
            {'curves': ['loss']},
            'Unknown curve',
        ),
    ],
)
def test_plot_runs_errors(tmp_path, runs, kwargs, match):
  output = tmp_path / 'x.png'
  with pytest.raises(ValueError, match=match):
    plots.plot_runs(runs, output, **kwargs)
  assert not output.exists()


# scripts/plot_runs.py


@pytest.fixture(scope='module')
def script():
  spec = importlib.util.spec_from_file_location('plot_runs_script', _SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture
def run_script(script):
  """Parses the flags (argv without the program) and runs the script's main."""

  def run(*argv):
    flags.FLAGS.unparse_flags()
    flags.FLAGS(['plot_runs.py', *argv])
    try:
      script.main(['plot_runs.py'])
    finally:
      flags.FLAGS.unparse_flags()

  return run


def test_script_writes_the_figure(run_script, run_a, run_b, tmp_path):
  output = tmp_path / 'out' / 'fig.png'
  run_script(
      f'--run_dirs={run_a},{run_b}',
      '--labels=A,B',
      '--curves=window',
      '--metric=loss',
      f'--output={output}',
  )
  with open(output, 'rb') as f:
    assert f.read(8) == _PNG_SIGNATURE


@pytest.mark.parametrize(
    'argv, match',
    [
        ([], '--run_dirs'),
        (['--run_dirs={a}', '--labels=x,y'], r'--labels has 2 label\(s\)'),
        (['--run_dirs={a}', '--metric=acc'], r"--metric: Metric 'acc'"),
        (['--run_dirs={a},{missing}'], r'--run_dirs: No metrics\.csv'),
        (['--run_dirs={a}', '--curves=window,train'], '--curves'),
        (['--run_dirs={a}', '--output='], '--output'),
        (
            ['--run_dirs={a}', '--output={tmp}/fig.pdf'],
            r'--output must be a \.png',
        ),
    ],
)
def test_script_usage_errors(run_script, run_a, tmp_path, argv, match):
  values = {
      'a': run_a,
      'missing': str(tmp_path / 'missing'),
      'tmp': str(tmp_path),
  }
  argv = [a.format(**values) for a in argv]
  if not any(a.startswith('--output') for a in argv):
    argv.append(f'--output={tmp_path / "fig.png"}')
  with pytest.raises(app.UsageError, match=match):
    run_script(*argv)
  assert not list(tmp_path.glob('*.png'))


def test_script_binary_end_to_end(run_a, tmp_path):
  output = tmp_path / 'fig.png'
  result = subprocess.run(
      [
          sys.executable,
          _SCRIPT,
          f'--run_dirs={run_a}',
          f'--output={output}',
          '--title=smoke',
      ],
      capture_output=True,
      text=True,
      check=False,
      cwd=_ROOT,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'),
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert f'Wrote {output}' in result.stdout
  assert 'Exception ignored' not in result.stderr  # TFF's exit traceback.
  with open(output, 'rb') as f:
    assert f.read(8) == _PNG_SIGNATURE
