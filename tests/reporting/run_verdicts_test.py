"""`run_verdicts`: paired verdicts from runs-CSV lines, by hand."""

import pytest

from tff_fedwin.experiments import papers
from tff_fedwin.reporting import run_verdicts


def _line(row, seed, window, global_, experiment='e'):
  # As csv.DictReader gives them: strings.
  return dict(
      experiment=experiment,
      row=row,
      seed=str(seed),
      window_accuracy=str(window),
      global_accuracy=str(global_),
  )


# Row 'w' (evaluate mode): window - global per seed 0.25, 0.5, 0.75 (exact in
# binary). Rows 'a' and 'b' have no window; a - b per seed 0.5, 0.5, 0.5.
_RECORDS = [
    _line('w', 0, 0.5, 0.25),
    _line('w', 1, 0.75, 0.25),
    _line('w', 2, 1.0, 0.25),
    _line('a', 0, 0.75, 0.75),
    _line('a', 1, 0.75, 0.75),
    _line('a', 2, 1.0, 1.0),
    _line('b', 0, 0.25, 0.25),
    _line('b', 1, 0.25, 0.25),
    _line('b', 2, 0.5, 0.5),
    _line('w', 0, 0.0, 0.9, experiment='other'),
]


def test_comparisons_pair_by_seed_and_skip_rows_without_a_window():
  found = run_verdicts.comparisons(_RECORDS, 'e', {'e': (('a', 'b'),)})
  assert found == [
      ('window - global', 'w', {'0': 0.25, '1': 0.5, '2': 0.75}),
      ('row A - row B (global)', 'a - b', {'0': 0.5, '1': 0.5, '2': 0.5}),
  ]


def test_verdict_table_by_hand():
  lines = run_verdicts.verdict_table(_RECORDS, 'e', {'e': (('a', 'b'),)})
  # w: [0.25, 0.5, 0.75] -> mean 0.5, sample std 0.25, half-width 4.303 *
  # 0.25 / sqrt(3) = 0.62108 -> [-0.1211, +1.1211]: within noise.
  # a - b: [0.5] * 3 -> std 0, interval [0.5, 0.5] -> Yes.
  assert lines[2:] == [
      '| paired by seed | rows | seeds | mean | sample std | 95% interval | '
      'seeds > 0 | verdict |',
      '|---|---|---:|---:|---:|---:|---:|---|',
      '| window - global | w | 3 | +0.5000 | 0.2500 | [-0.1211, +1.1211] | '
      '3/3 | within noise |',
      '| row A - row B (global) | a - b | 3 | +0.5000 | 0.0000 | '
      '[+0.5000, +0.5000] | 3/3 | Yes |',
      '',
  ]
  assert 'Yes if the interval is above 0' in lines[0]


def test_model_comparisons_pick_each_rows_model_by_hand():
  # Row 's' (SWA-like): window 0.5, 1.0, 0.75; global 0.25 in every seed.
  records = _RECORDS + [
      _line('s', 0, 0.5, 0.25),
      _line('s', 1, 1.0, 0.25),
      _line('s', 2, 0.75, 0.25),
  ]
  pairs = {
      'e': (('s', 'window', 'w', 'window'), ('s', 'global', 'w', 'window'))
  }
  found = run_verdicts.comparisons(records, 'e', {}, pairs)
  # Minus w's window 0.5, 0.75, 1.0: s's window, s's global.
  assert found[2:] == [
      (
          'row A (model) - row B (model)',
          's (window) - w (window)',
          {'0': 0.0, '1': 0.25, '2': -0.25},
      ),
      (
          'row A (model) - row B (model)',
          's (global) - w (window)',
          {'0': -0.25, '1': -0.5, '2': -0.75},
      ),
  ]
  lines = run_verdicts.verdict_table(records, 'e', {}, pairs)
  # [0, 0.25, -0.25]: mean 0, sample std 0.25, half-width 4.303 * 0.25 /
  # sqrt(3) = 0.62108 -> [-0.6211, +0.6211]. [-0.25, -0.5, -0.75]: mean
  # -0.5, std 0.25 -> [-1.1211, +0.1211]. Both within noise.
  assert lines[6:] == [
      '| row A (model) - row B (model) | s (window) - w (window) | 3 | '
      '+0.0000 | 0.2500 | [-0.6211, +0.6211] | 1/3 | within noise |',
      '| row A (model) - row B (model) | s (global) - w (window) | 3 | '
      '-0.5000 | 0.2500 | [-1.1211, +0.1211] | 0/3 | within noise |',
      '',
  ]


def test_one_seed_prints_no_interval():
  lines = run_verdicts.verdict_table(_RECORDS, 'other', {})
  # 'other' has one seed: window - global -0.9, no interval.
  assert lines[4] == (
      '| window - global | w | 1 | -0.9000 |  |  | 0/1 | '
      'one seed: no interval |'
  )


def test_no_paired_claim_gives_no_lines():
  no_window = [_line('a', 0, 0.5, 0.5)]
  assert run_verdicts.verdict_table(no_window, 'e', {}) == []


def test_a_compared_row_without_lines_fails_naming_it():
  with pytest.raises(ValueError, match=r"e: no runs-CSV line of rows \['c'\]"):
    run_verdicts.comparisons(_RECORDS, 'e', {'e': (('a', 'c'),)})


def test_every_compared_row_is_a_row_of_its_experiment():
  table = papers.paper_experiments()
  for experiment, pairs in run_verdicts.ROW_COMPARISONS.items():
    for a, b in pairs:
      assert a in table[experiment] and b in table[experiment], (a, b)
  for experiment, pairs in run_verdicts.MODEL_COMPARISONS.items():
    for a, model_a, b, model_b in pairs:
      assert a in table[experiment] and b in table[experiment], (a, b)
      assert {model_a, model_b} <= {'window', 'global'}
