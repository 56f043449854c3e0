"""`window_sweep`: several windows' accuracy at several horizons, by hand."""

import csv
import os
import re

import pytest

from tff_fedwin.reporting import window_sweep


def _write_run(directory, columns):
  """metrics.csv with eval rows at rounds 2, 4, 6, 8 and empty odd rounds."""
  os.makedirs(directory)
  names = list(columns)
  with open(os.path.join(directory, 'metrics.csv'), 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['round_num', 'train/window_5/window_fill', *names])
    for r in range(1, 9):
      values = [columns[n][r // 2 - 1] if r % 2 == 0 else '' for n in names]
      writer.writerow([r, 1, *values])
  return str(directory)


@pytest.fixture
def runs(tmp_path):
  # Main window W = 10, one extra window W = 5, two seeds.
  a = _write_run(
      tmp_path / 'a',
      {
          'global/accuracy': [0.1, 0.2, 0.3, 0.4],
          'window/accuracy': [0.5, 0.5, 0.6, 0.6],
          'window_5/accuracy': [0.2, 0.4, 0.6, 0.8],
          'window_5/loss': [1, 1, 1, 1],
      },
  )
  b = _write_run(
      tmp_path / 'b',
      {
          'global/accuracy': [0.2, 0.2, 0.2, 0.2],
          'window/accuracy': [0.4, 0.4, 0.4, 0.4],
          'window_5/accuracy': [0.3, 0.3, 0.9, 0.9],
          'window_5/loss': [1, 1, 1, 1],
      },
  )
  return [a, b]


def test_recorded_window_sizes_are_the_eval_columns(runs):
  # train/window_5/... is a measurement, window_5/... the eval columns.
  assert window_sweep.recorded_window_sizes(runs[0]) == [5]


def test_horizon_table_by_hand(runs):
  lines = window_sweep.horizon_table(
      runs, window_size=10, horizons=(4, 8), last_n=2
  )
  # Last 2 evals up to round 4 are rounds 2, 4; up to round 8, rounds 6, 8.
  # global: a (.1+.2)/2=.15, b .2 -> .175 +- .025; a .35, b .2 -> .275 +- .075
  # W=5:    a .3, b .3 -> .3 +- 0;   a .7, b .9 -> .8 +- .1
  # W=10:   a .5, b .4 -> .45 +- .05; a .6, b .4 -> .5 +- .1
  # Best per seed: to round 4, W=10 in both; to round 8, W=5 in both.
  assert lines[2:] == [
      '| none (global) | 0.1750 +- 0.0250 | 0.2750 +- 0.0750 |',
      '| 5 | 0.3000 +- 0.0000 | 0.8000 +- 0.1000 |',
      '| 10 | 0.4500 +- 0.0500 | 0.5000 +- 0.1000 |',
      '| best W per seed | 10, 10 | 5, 5 |',
  ]
  assert lines[0].startswith('| W | acc, last 2 evals to round 4 |')


def test_too_few_evals_before_a_horizon_fail(runs):
  with pytest.raises(ValueError, match='only 1 eval rounds up to round 3'):
    window_sweep.horizon_table(runs, window_size=10, horizons=(3,), last_n=2)


# A cell of the rule: mean +- sample std [low, high], k/n > 0: verdict.
_CELL = re.compile(
    r'([+-][\d.]+) \+- ([\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\], '
    r'(\d+/\d+) > 0: (.+)'
)


def _cell(text):
  """(mean, std, low, high, 'k/n', verdict) of a rule cell."""
  match = _CELL.fullmatch(text)
  assert match, text
  numbers = tuple(float(g) for g in match.groups()[:4])
  return (*numbers, *match.groups()[4:])


# Two runs: t(0.975, 1) = 12.706; for differences x, y the sample std is
# |x - y| / sqrt(2) and the half-width 12.706 * std / sqrt(2) = 12.706 *
# |x - y| / 2.
def test_paired_difference_table_by_hand(runs):
  lines = window_sweep.paired_difference_table(
      runs, window_size=10, horizons=(4, 8), last_n=2
  )
  # Best by seed-mean: W=10 to round 4 (.45), W=5 to round 8 (.8).
  # To round 4, minus W=10: global a .15-.5, b .2-.4 -> -.35, -.2: mean
  #   -.275, std .15 / sqrt(2) = .1061, half-width 12.706 * .075 = .9530;
  #   W=5: a .3-.5, b .3-.4 -> -.2, -.1: mean -.15, std .0707, half-width
  #   12.706 * .05 = .6353.
  # To round 8, minus W=5: global a .35-.7, b .2-.9 -> -.35, -.7: mean
  #   -.525, std .2475, half-width 12.706 * .175 = 2.2236;
  #   W=10: a .6-.7, b .4-.9 -> -.1, -.5: mean -.3, std .2828, half-width
  #   12.706 * .2 = 2.5412. Every interval holds 0.
  assert lines[:2] == [
      '| W | minus W = 10 to round 4 | minus W = 5 to round 8 |',
      '|---|---:|---:|',
  ]
  expected = {
      'none (global)': [(-0.275, 0.15, '0/2'), (-0.525, 0.35, '0/2')],
      '5': [(-0.15, 0.1, '0/2'), None],
      '10': [None, (-0.3, 0.4, '0/2')],
  }
  for line in lines[2:]:
    label, *cells = [c.strip() for c in line.strip('|').split('|')]
    for cell, want in zip(cells, expected[label]):
      if want is None:
        assert cell == '0 (best)'
        continue
      mean, spread, count = want
      half = 12.706 * spread / 2
      assert _cell(cell) == pytest.approx(
          (
              mean,
              spread / 2**0.5,
              mean - half,
              mean + half,
              count,
              'within noise',
          ),
          abs=1e-4,
      )
  assert len(lines) == 5


def test_gain_table_by_hand(runs):
  lines = window_sweep.gain_table(
      runs, window_size=10, horizons=(4, 8), last_n=2
  )
  # W minus global, per run. To round 4: W=5 a .3-.15, b .3-.2 -> .15, .1;
  # W=10 a .5-.15, b .4-.2 -> .35, .2. To round 8: W=5 a .7-.35, b .9-.2
  # -> .35, .7; W=10 a .6-.35, b .4-.2 -> .25, .2.
  assert lines[:2] == [
      '| W | W - global to round 4 | W - global to round 8 |',
      '|---|---:|---:|',
  ]
  assert [line.split(' |')[0] for line in lines[2:]] == ['| 5', '| 10']
  pairs = {'5': [(0.15, 0.1), (0.35, 0.7)], '10': [(0.35, 0.2), (0.25, 0.2)]}
  for line in lines[2:]:
    label, *cells = [c.strip() for c in line.strip('|').split('|')]
    for cell, (x, y) in zip(cells, pairs[label]):
      mean, half = (x + y) / 2, 12.706 * abs(x - y) / 2
      assert _cell(cell) == pytest.approx(
          (
              mean,
              abs(x - y) / 2**0.5,
              mean - half,
              mean + half,
              '2/2',
              'within noise',
          ),
          abs=1e-4,
      )


def test_window_table_by_hand(runs):
  lines = window_sweep.window_table(runs, window_size=10, last_n=2)
  # Last 2 evals: rounds 6, 8. Per run mean (std over the two evals):
  #   a: global .35 (.05), W=5 .7 (.1), W=10 .6 (0)
  #   b: global .2 (0),    W=5 .9 (0),  W=10 .4 (0)
  # W - global per run: W=5 .35, .7 -> .525 +- .175; W=10 .25, .2 -> .225
  # +- .025. Smoothness: global (.05, 0) -> .025 +- .025; W=5 .05 +- .05.
  assert lines == [
      '| W | acc (last 2) | W - global (paired) | smoothness |',
      '|---|---:|---:|---:|',
      '| none (global) | 0.2750 +- 0.0750 |  | 0.0250 +- 0.0250 |',
      '| 5 | 0.8000 +- 0.1000 | 0.5250 +- 0.1750 | 0.0500 +- 0.0500 |',
      '| 10 | 0.5000 +- 0.1000 | 0.2250 +- 0.0250 | 0.0000 +- 0.0000 |',
  ]


def test_window_table_needs_last_n_evals(runs):
  with pytest.raises(ValueError, match='only 4 eval rounds; the summary'):
    window_sweep.window_table(runs, window_size=10, last_n=5)
