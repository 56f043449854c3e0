"""`paired`: a row's rounds alternated with its own bound's."""

import pytest

from benchmarks import paired
from benchmarks import rounds
from benchmarks import stepped


def _logged(name, log):
  """A `stepped.Rounds` whose every call is appended to `log`."""
  return stepped.Rounds(
      lambda: log.append(name),
      lambda: 1.0,
      lambda: log.append(f'{name} closed'),
  )


def test_measure_group_of_one_row_alternates_which_side_goes_first():
  log = []

  (row_s,), bound_s = paired.measure_group(
      [_logged('row', log)], _logged('bound', log), 3
  )

  assert log == ['row', 'bound', 'bound', 'row', 'row', 'bound']
  assert len(row_s) == len(bound_s) == 3


def test_measure_group_reverses_the_rows_every_other_cycle():
  log = []

  seconds, bound_s = paired.measure_group(
      [_logged('a', log), _logged('b', log)], _logged('bound', log), 2
  )

  assert log == ['a', 'b', 'bound', 'bound', 'b', 'a']
  assert [len(s) for s in seconds] == [2, 2] and len(bound_s) == 2


def test_ratios_are_taken_within_each_pair():
  result = paired.PairResult('a', [3.0, 2.0], [2.0, 4.0])
  assert result.ratios == [1.5, 0.5]


def test_markdown_table_gives_medians_and_ranges_by_hand():
  result = paired.PairResult('scaffold', [3.0, 2.0, 4.0], [2.0, 2.0, 2.0])

  table = paired.markdown_table([result], 'h')

  # s/round 3, 2, 4: median 3; bound 2 each; ratios 1.5, 1.0, 2.0.
  assert table.splitlines()[-1] == (
      '| scaffold | 3.00 (2.00-4.00) | 2.00 (2.00-2.00) | 1.50 (1.00-2.00) |'
  )


def test_run_pairs_refuses_a_row_it_cannot_step():
  rows = [
      rounds.Row('row', lambda data, n: (1.0, 1.0), own_bound='bound'),
      rounds.Row('bound', lambda data, n: (1.0, 1.0), num_workers=0),
  ]
  with pytest.raises(ValueError, match="'row' cannot be stepped"):
    paired.run_pairs(rows, data=None, num_pairs=1)


def test_run_pairs_measures_rows_with_own_bounds_and_closes_both():
  log = []
  step = lambda name: stepped.SteppedRow(lambda data: _logged(name, log))
  rows = [
      rounds.Row('tff', step('tff')),
      rounds.Row('row', step('row'), own_bound='bound'),
      rounds.Row('bound', step('bound'), num_workers=0),
  ]

  (result,) = paired.run_pairs(rows, data=None, num_pairs=2, log=log.append)

  assert result.name == 'row'
  assert len(result.row_seconds) == len(result.bound_seconds) == 2
  # The bound, prepared second, is closed first.
  assert log[:6] == [
      'row',
      'bound',
      'bound',
      'row',
      'bound closed',
      'row closed',
  ]
  assert 'tff' not in log


def test_run_pairs_closes_the_row_when_its_bound_fails_to_prepare():
  log = []

  def failing(data):
    raise RuntimeError('bound failed')

  rows = [
      rounds.Row(
          'row',
          stepped.SteppedRow(lambda data: _logged('row', log)),
          own_bound='bound',
      ),
      rounds.Row('bound', stepped.SteppedRow(failing), num_workers=0),
  ]

  with pytest.raises(RuntimeError, match='bound failed'):
    paired.run_pairs(rows, data=None, num_pairs=1)
  assert log == ['row closed']


def test_run_pairs_interleaves_the_rows_of_one_bound():
  log = []
  step = lambda name: stepped.SteppedRow(lambda data: _logged(name, log))
  rows = [
      rounds.Row('a', step('a'), own_bound='bound'),
      rounds.Row('other', step('other'), own_bound='other bound'),
      rounds.Row('b', step('b'), own_bound='bound'),
      rounds.Row('bound', step('bound'), num_workers=0),
      rounds.Row('other bound', step('other bound'), num_workers=0),
  ]

  results = paired.run_pairs(rows, data=None, num_pairs=2, log=log.append)

  assert [r.name for r in results] == ['a', 'b', 'other']
  assert results[0].bound_seconds is results[1].bound_seconds
  rounds_run = [e for e in log if ':' not in e and 'closed' not in e]
  assert rounds_run == [
      'a', 'b', 'bound', 'bound', 'b', 'a',
      'other', 'other bound', 'other bound', 'other',
  ]  # fmt: skip
