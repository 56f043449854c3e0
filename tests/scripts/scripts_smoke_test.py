"""Smoke tests of the benchmark and reproduction binaries, run as a user runs them.

Tiny rows (2 clients x 1 step); each script runs in its own process (the two
define flags of the same names) and must write its markdown table. The reports
of finished runs that take the same flags share one run of reproduce_papers.py
(`shared_report`), each test checking its experiment's section.
"""

import csv
import itertools
import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks import algorithm_rows
from tests import script_runs
from tests.scripts import quiet_lines
from tff_fedwin.experiments import papers

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_TINY = ['--rounds=1', '--clients=2', '--steps=1', '--batch_size=2']


def _run(script, args, output):
  """Runs a benchmark as a user would; the row names of its table.

  Its stderr must be quiet (`quiet_lines`: the quiet-scripts check of
  benchmark.py and benchmark_window.py) and its stdout hold the table.
  """
  result = script_runs.run(
      [
          sys.executable,
          os.path.join(_ROOT, 'scripts', script),
          *_TINY,
          *args,
          f'--output={output}',
      ]
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert '| process | s/round |' in result.stdout, result.stdout[-3000:]
  quiet_lines.assert_quiet(result.stderr)
  with open(output) as f:
    return [
        line.split('|')[1].strip()
        for line in f
        if line.startswith('| ') and not line.startswith('| process')
    ]


def test_benchmark_window_writes_a_row_per_configuration(tmp_path):
  rows = _run(
      'benchmark_window.py',
      ['--window_sizes=2', '--read_every=2', '--noscaffold'],
      str(tmp_path / 'window.md'),
  )
  assert rows == [
      'TFF build_weighted_fed_avg (baseline)',
      'bound: same FedAvg arithmetic, one tf.function over tensors',
      'build_fed_win, no window',
      'build_fed_win WiMA W=2 E=2',
      'build_fed_win WiMA W=2 E=1, server state as files',
      'build_fed_win WiMA W=2 E=1, window kept by the program',
      'build_fed_win IMA W=2 broadcast, window kept by the program '
      '(active every timed round)',
      'TFF fed_avg + WindowedModelAveragingFactory W=2 E=2',
      'build_fed_win WiMA W=2 E=2, 2 rounds per call',
      'TFF fed_avg + WindowedModelAveragingFactory W=2 E=2, 2 rounds per call',
      'TFF build_weighted_fed_avg, 2 rounds per call',
      'TFF build_weighted_fed_avg (baseline)',
  ]


# Of the algorithm rows (`algorithm_rows._timed`), one per way a row is built:
# FedSAM through `build_fed_win`'s options, FedDyn through SCAFFOLD's row with
# another algorithm (states as files), FedFA through its own builder (the
# feature model). The other 8 take one of these ways with other arguments
# (each ~4.4 s on a fresh worker: all 35 rows took 153 s, AVX-512 kind, a
# test process beside it), and each algorithm's builder has its numpy and
# wiring tests (tests/algorithms/, tests/experiments/wiring_test.py).
_ALGORITHM_ROWS_RUN = ('fedsam', 'feddyn_files', 'fedfa')
_ALGORITHM_ROWS_SKIPPED = [
    name
    for name, kind in algorithm_rows.ROWS
    if kind not in _ALGORITHM_ROWS_RUN
]


def test_benchmark_report_covers_every_section(tmp_path):
  skip = '|'.join(re.escape(name) + '$' for name in _ALGORITHM_ROWS_SKIPPED)
  rows = _run(
      'benchmark.py',
      ['--workers=1,2', f'--rows=^(?!{skip})'],
      str(tmp_path / 'perf.md'),
  )
  assert rows[0] == rows[-1] == 'TFF build_weighted_fed_avg (baseline)'
  for expected in (
      'FedAvg via build_fed_win',
      'FedAvg via build_fed_win, server state as files',
      'FedAvg via build_fed_win, server state as files, client data by id '
      '(default with local workers)',
      'FedAvg via build_fed_win, loop_implementation=DATASET_ITERATOR',
      'FedAvg via build_fed_win, loop_implementation=DATASET_REDUCE',
      'bound: same FedAvg arithmetic, one tf.function over ' 'tensors',
      'same client training, plain TensorFlow, `for batch in '
      'dataset` (not a bound)',
      'build_fed_win WiMA W=100 E=10, 10 rounds per call',
      'build_fed_win WiMA W=100 E=10, server state as files',
      'build_fed_win WiMA W=100 E=10, window kept by the program, server '
      'state as files, client data by id (the default with local workers)',
      'SCAFFOLD, client states as TFF values',
      'SCAFFOLD, client states as files',
      'SCAFFOLD, client and server states as files',
      'SCAFFOLD, client and server states as files, client data by id '
      '(default with local workers)',
      'bound: same SCAFFOLD arithmetic, one tf.function',
      'WSM clients via build_fed_win',
      'WSM clients via build_fed_win, server state as files, client data by '
      'id (default with local workers)',
      'bound: same WSM-client arithmetic, one tf.function',
      'TFF build_weighted_fed_avg on 2 local workers',
      *(n for n, kind in algorithm_rows.ROWS if kind in _ALGORITHM_ROWS_RUN),
  ):
    assert expected in rows, rows
  assert not set(_ALGORITHM_ROWS_SKIPPED) & set(rows), rows


def test_benchmark_paired_measures_the_selected_row_against_its_bound(
    tmp_path,
):
  rows = _run(
      'benchmark.py', ['--paired=2', '--rows=^WSM'], str(tmp_path / 'p.md')
  )
  # Only rows with an own bound are paired; the references are not.
  assert rows == [
      'WSM clients via build_fed_win',
      'WSM clients via build_fed_win, server state as files, client data by '
      'id (default with local workers)',
  ]


@pytest.mark.parametrize(
    'rows, message', [('fedprox', 'matches no row'), ('(', 'regular')]
)
def test_benchmark_refuses_bad_rows_in_one_line(rows, message):
  result = subprocess.run(
      [
          sys.executable,
          os.path.join(_ROOT, 'scripts', 'benchmark.py'),
          f'--rows={rows}',
      ],
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith('benchmark.py: --rows=') or last.startswith(
      'benchmark.py: --rows must'
  ), result.stderr[-2000:]
  assert message in last
  assert 'Traceback' not in result.stderr


def _reproduce(*args):
  """Runs scripts/reproduce_papers.py with `args`; the CompletedProcess."""
  return subprocess.run(
      [
          sys.executable,
          os.path.join(_ROOT, 'scripts', 'reproduce_papers.py'),
          *args,
      ],
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )


def _write_summary(
    run_dir, *, window, global_, window_std=0.0, global_std=0.0, seconds=60.0
):
  """A finished run's summary.json (what run_experiment writes) in run_dir."""
  summary = {
      'window': {'accuracy': {'mean': window, 'std': window_std}},
      'global': {'accuracy': {'mean': global_, 'std': global_std}},
      'total_round_and_eval_time_seconds': seconds,
      'wall_time_seconds': seconds + 10.0,
      'resumed_from_round': None,
  }
  (run_dir / 'summary.json').write_text(json.dumps(summary))


def test_reproduce_papers_rejects_unknown_experiment_naming_the_flag():
  result = _reproduce('--experiments=cifar100')
  assert result.returncode != 0
  assert '--experiments: unknown' in result.stdout + result.stderr


def test_reproduce_papers_reports_finished_runs(tmp_path):
  # Two finished shakespeare runs (seeds 0 and 1) of 4 rounds, eval at 2 and
  # 4: the script must not train (summary.json exists) and must tabulate the
  # summaries, list the runs and plot the seed-mean curves.
  root = tmp_path / 'runs'
  window_means, global_means = [0.5, 0.25], [0.375, 0.125]
  window_stds, global_stds = [0.0625, 0.125], [0.25, 0.5]
  for seed in (0, 1):
    run_dir = root / 'shakespeare' / f'fedavg_shakespeare_W=10_seed{seed}'
    run_dir.mkdir(parents=True)
    _write_summary(
        run_dir,
        window=window_means[seed],
        global_=global_means[seed],
        window_std=window_stds[seed],
        global_std=global_stds[seed],
        seconds=60.0 * (seed + 1),
    )
    (run_dir / 'metrics.csv').write_text(
        'round_num,window/accuracy,global/accuracy\n'
        '1,,\n2,0.5,0.25\n3,,\n4,0.75,0.5\n'
    )
  # Earlier results: another experiment's (kept) and a stale shakespeare
  # section and line (replaced).
  output = tmp_path / 'tables.md'
  output.write_text('### shakespeare\n\nstale\n\n### ima\n\nkept\n')
  (tmp_path / 'runs.csv').write_text(
      'experiment,row,seed\nshakespeare,stale,5\nima,kept,0\n'
  )
  result = _reproduce(
      '--experiments=shakespeare',
      '--seeds=0,1',
      f'--root_output_dir={root}',
      f'--output={output}',
      f'--plot_dir={tmp_path / "plots"}',
      f'--runs_csv={tmp_path / "runs.csv"}',
  )
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [
      line
      for line in output.read_text().splitlines()
      if line.startswith('| fedavg')
  ]
  # mean +- population std over the seeds, e.g. window: (0.5 + 0.25) / 2 =
  # 0.375 +- 0.125; window - global per seed: 0.125 and 0.125; smoothness
  # (0.0625 + 0.125) / 2 = 0.09375 +- 0.03125; time (60 + 120) s = 3.0 min.
  assert rows == [
      '| fedavg shakespeare W=10 | 100 | 2 | 0.3750 +- 0.1250 | '
      '0.2500 +- 0.1250 | 0.1250 +- 0.0000 | 0.0938 +- 0.0312 | '
      '0.3750 +- 0.1250 | 3.0 |'
  ]
  text = output.read_text()
  assert 'kept' in text and 'stale' not in text
  assert text.index('### ima') < text.index('### shakespeare')  # Table order.
  png = tmp_path / 'plots' / 'shakespeare.png'
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  with open(tmp_path / 'runs.csv', newline='') as f:
    runs = [
        (
            r['row'],
            r['seed'],
            r['round_and_eval_seconds'],
            r['window_accuracy'],
            r['global_accuracy'],
        )
        for r in csv.DictReader(f)
    ]
  assert runs == [
      ('kept', '0', '', '', ''),
      ('fedavg shakespeare W=10', '0', '60.0', '0.5', '0.375'),
      ('fedavg shakespeare W=10', '1', '120.0', '0.25', '0.125'),
  ]


# The experiments whose finished runs one run of the script reports
# (`shared_report`), at --total_rounds=_REPORT_ROUNDS; each test checks its
# experiment's section of the tables, what a run of that experiment alone
# writes (a report reads each experiment's runs on its own).
_SHARED_EXPERIMENTS = (
    'mnist_window_horizon',
    'ima',
    'ima_early_start',
    'tuning',
)
_REPORT_ROUNDS = 20
# The label skews of mnist_window_horizon's rows (scripts/reproduce_papers.py).
_HORIZON_ALPHAS = ('0.05', '0.0')
# The window sweep's accuracies, constant per column: {column: (seed 0, seed
# 1)}.
_HORIZON_ACCURACIES = {
    'global': (0.5, 0.7),
    'window': (0.8, 0.8),  # W = 100
    'window_5': (0.6, 0.9),
    'window_10': (0.7, 0.7),
    'window_50': (0.9, 0.75),
    'window_200': (0.1, 0.2),
}


def _write_window_sweep_runs(root):
  """Two finished runs per row of mnist_window_horizon under `root`."""
  for alpha, seed in itertools.product(_HORIZON_ALPHAS, (0, 1)):
    run_dir = (
        root
        / 'mnist_window_horizon'
        / f'fedavg_alpha={alpha}_W=5,10,50,100,200_seed{seed}'
    )
    run_dir.mkdir(parents=True)
    _write_summary(
        run_dir, window=0.8, global_=_HORIZON_ACCURACIES['global'][seed]
    )
    header = ['round_num'] + [f'{c}/accuracy' for c in _HORIZON_ACCURACIES]
    rows = [
        [str(r)] + [str(v[seed]) for v in _HORIZON_ACCURACIES.values()]
        for r in range(1, _REPORT_ROUNDS + 1)
    ]
    (run_dir / 'metrics.csv').write_text(
        '\n'.join(','.join(line) for line in [header, *rows]) + '\n'
    )


# The IMA experiments' rows: {label: (round the test curve reaches 0.5,
# which experiment's directory holds the run)}. ima_early_start's no-window
# rows are ima_local_setup's runs (same config: papers.shared_runs).
_IMA_ROWS = {
    'ima': {
        'fedavg alpha=0.1 no window': (20, 'ima'),
        'fedavg alpha=0.1 IMA': (10, 'ima'),
        'fedavg alpha=0.1 IMA schedule only W=1': (20, 'ima'),
        'fedadam alpha=0.1 no window': (20, 'ima'),
        'fedadam alpha=0.1 IMA': (10, 'ima'),
    },
    'ima_early_start': {
        'fedavg alpha=0.1 no window': (20, 'ima_local_setup'),
        'fedavg alpha=0.1 IMA': (10, 'ima_early_start'),
        'fedadam alpha=0.1 no window': (20, 'ima_local_setup'),
        'fedadam alpha=0.1 IMA': (10, 'ima_early_start'),
    },
}


def _write_ima_runs(root, experiment):
  """The experiment's finished runs under `root` (evals every 2 rounds).

  Every run ends at 0.5 (its summary mean); the no-window and schedule-only
  runs climb as 0.5 r / 20 and first reach 0.5 at round 20, the IMA runs as
  min(0.5, 0.5 r / 10): round 10, a speed-up of 20 / 10.
  """
  for (label, (reach, owner)), seed in itertools.product(
      _IMA_ROWS[experiment].items(), (0, 1)
  ):
    run_dir = root / owner / f'{label.replace(" ", "_")}_seed{seed}'
    run_dir.mkdir(parents=True)
    _write_summary(run_dir, window=0.5, global_=0.5, seconds=1.0)
    rows = ['round_num,window/accuracy,global/accuracy']
    for r in range(1, _REPORT_ROUNDS + 1):
      value = f'{min(0.5, 0.5 * r / reach)}' if r % 2 == 0 else ''
      rows.append(f'{r},{value},{value}')
    (run_dir / 'metrics.csv').write_text('\n'.join(rows) + '\n')


def _write_tuning_runs(root):
  """Finished tuning runs under `root` (seed 0 only, whatever --seeds says).

  Client lr groups score 0.9 - |lr - 0.1| (best 0.1), except lr 0.5, which
  diverged (a diverged.txt, no summary); server lr groups score 0.5 + slr /
  10 (best 1.0).
  """
  for label in papers.paper_experiments()['tuning']:
    group, value = papers.tuning_group(label)
    accuracy = (
        0.5 + value / 10
        if group.startswith('fedavgm')
        else 0.9 - abs(value - 0.1)
    )
    run_dir = root / 'tuning' / f'{label.replace(" ", "_")}_seed0'
    run_dir.mkdir(parents=True)
    if value == 0.5:
      (run_dir / 'diverged.txt').write_text('loss is nan at round 3\n')
      continue
    _write_summary(run_dir, window=accuracy, global_=accuracy)


@pytest.fixture(scope='module')
def shared_report(tmp_path_factory):
  """One run of the script on the finished runs of `_SHARED_EXPERIMENTS`.

  The script must train none of them (a training run would take minutes and
  change the numbers). Returns (the CompletedProcess, {experiment: its
  section's lines}, the plot directory).
  """
  tmp_path = tmp_path_factory.mktemp('shared_report')
  root = tmp_path / 'runs'
  _write_window_sweep_runs(root)
  for experiment in _IMA_ROWS:
    _write_ima_runs(root, experiment)
  _write_tuning_runs(root)
  output = tmp_path / 'tables.md'
  result = _reproduce(
      f'--experiments={",".join(_SHARED_EXPERIMENTS)}',
      '--seeds=0,1',
      f'--total_rounds={_REPORT_ROUNDS}',
      f'--root_output_dir={root}',
      f'--output={output}',
      f'--plot_dir={tmp_path / "plots"}',
      '--runs_csv=',
  )
  return result, _sections(output), tmp_path / 'plots'


def _sections(path):
  """{experiment: its `### <experiment>` section's lines} of a tables file."""
  sections, name = {}, None
  lines = path.read_text().splitlines() if path.exists() else []
  for line in lines:
    if line.startswith('### '):
      name = line[len('### ') :]
    if name is not None:
      sections.setdefault(name, []).append(line)
  return sections


def test_reproduce_papers_reports_a_window_sweep_run(shared_report):
  # Two finished runs per row of mnist_window_horizon (one horizon, the last
  # round; the last 10 evals end there). Accuracies are constant per column,
  # so each cell is mean +- std of the two seeds' constants.
  result, sections, plot_dir = shared_report
  assert result.returncode == 0, result.stderr[-3000:]
  lines = sections['mnist_window_horizon']
  starts = [
      i
      for i, line in enumerate(lines)
      if line == f'| W | acc, last 10 evals to round {_REPORT_ROUNDS} |'
  ]
  assert len(starts) == len(_HORIZON_ALPHAS)
  for start in starts:
    assert lines[start + 2 : start + 9] == [
        '| none (global) | 0.6000 +- 0.1000 |',
        '| 5 | 0.7500 +- 0.1500 |',
        '| 10 | 0.7000 +- 0.0000 |',
        '| 50 | 0.8250 +- 0.0750 |',
        '| 100 | 0.8000 +- 0.0000 |',
        '| 200 | 0.1500 +- 0.0500 |',
        '| best W per seed | 50, 5 |',
    ]
  # The one-window columns per W; W = 5 minus global per seed: 0.6 - 0.5,
  # 0.9 - 0.7 -> 0.15 +- 0.05; constant curves have smoothness 0.
  five = '| 5 | 0.7500 +- 0.1500 | 0.1500 +- 0.0500 | 0.0000 +- 0.0000 |'
  assert lines.count(five) == len(_HORIZON_ALPHAS)
  for alpha in _HORIZON_ALPHAS:  # One figure per row.
    png = plot_dir / f'mnist_window_horizon_fedavg_alpha={alpha}.png'
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.parametrize('experiment', sorted(_IMA_ROWS))
def test_reproduce_papers_reports_rounds_to_target_for_ima(
    shared_report, experiment
):
  # Finished runs of the experiment (`_write_ima_runs`): the no-window rows
  # reach 0.5 at round 20, the IMA rows at round 10. The script must find
  # every run.
  labels = _IMA_ROWS[experiment]
  result, sections, _ = shared_report
  assert result.returncode == 0, result.stderr[-3000:]
  lines = sections[experiment]
  table = [l for l in lines if l.startswith('| ') and 'speed' not in l]
  assert table[-len(labels) :] == [
      f'| {label} | {reach}, {reach} | {reach}.0 +- 0.0 | '
      f'{20 / reach:.2f} +- 0.00 |'
      for label, (reach, _) in labels.items()
  ]
  shared = [l for l in lines if l.startswith('Same config, same runs')]
  assert len(shared) == (experiment == 'ima_early_start')


def test_reproduce_papers_tuning_picks_the_best_validation_accuracy(
    shared_report,
):
  # Finished tuning runs (`_write_tuning_runs`). The report says where
  # papers.TUNED differs.
  result, sections, _ = shared_report
  assert result.returncode == 0, result.stderr[-3000:]
  lines = sections['tuning']
  # Hand-derived scores: lr 0.02, 0.05, 0.1, 0.2 -> 0.82, 0.85, 0.9, 0.8;
  # slr 0.1, 1 -> 0.51, 0.6.
  scores = {
      'lr': (
          '0.02: 0.8200, 0.05: 0.8500, 0.1: 0.9000, 0.2: 0.8000, 0.5: diverged',
          0.1,
      ),
      'slr': ('0.1: 0.5100, 1: 0.6000', 1.0),
  }
  for group, used in papers.TUNED.items():
    tried, best = scores['slr' if group.startswith('fedavgm') else 'lr']
    flag = '' if used == best else ' (differs: update papers.TUNED)'
    expected = f'| {group} | {tried} | {best:g} | {used:g}{flag} |'
    assert expected in lines, expected
