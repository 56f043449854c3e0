"""Smoke tests of the benchmark and reproduction binaries, run as a user runs them.

Tiny rows (2 clients x 1 step); each script runs in its own process (the two
define flags of the same names) and must write its markdown table.
"""

import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_TINY = ['--rounds=1', '--clients=2', '--steps=1', '--batch_size=2']


def _run(script, args, output):
  result = subprocess.run(
      [sys.executable, os.path.join(_ROOT, 'scripts', script), *_TINY, *args,
       f'--output={output}'],
      capture_output=True, text=True, timeout=900, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output) as f:
    return [line.split('|')[1].strip() for line in f
            if line.startswith('| ') and not line.startswith('| process')]


def test_benchmark_window_writes_a_row_per_configuration(tmp_path):
  rows = _run('benchmark_window.py',
              ['--window_sizes=2', '--read_every=2', '--noscaffold'],
              str(tmp_path / 'window.md'))
  assert rows == [
      'TFF build_weighted_fed_avg (baseline)',
      'build_fed_win, no window',
      'build_fed_win WiMA W=2 E=2',
      'TFF fed_avg + WindowedModelAveragingFactory W=2 E=2',
      'build_fed_win WiMA W=2 E=2, 2 rounds per call',
      'TFF fed_avg + WindowedModelAveragingFactory W=2 E=2, 2 rounds per call',
      'TFF build_weighted_fed_avg, 2 rounds per call',
      'TFF build_weighted_fed_avg (baseline)',
  ]


def test_benchmark_report_covers_every_section(tmp_path):
  rows = _run('benchmark.py', ['--workers=1,2'], str(tmp_path / 'perf.md'))
  assert rows[0] == rows[-1] == 'TFF build_weighted_fed_avg (baseline)'
  for expected in ('FedAvg via build_fed_win',
                   'same client training, plain TensorFlow (no TFF)',
                   'build_fed_win WiMA W=100 E=10, 10 rounds per call',
                   'SCAFFOLD',
                   'TFF build_weighted_fed_avg on 2 local workers'):
    assert expected in rows, rows


def test_reproduce_papers_rejects_unknown_experiment_naming_the_flag():
  result = subprocess.run(
      [sys.executable, os.path.join(_ROOT, 'scripts', 'reproduce_papers.py'),
       '--experiments=cifar100'],
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode != 0
  assert '--experiments: unknown' in result.stdout + result.stderr
