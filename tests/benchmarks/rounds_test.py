"""`rounds.markdown_table`: ratios to TFF, to the bound and to own bounds."""

import pytest

from benchmarks import rounds


def test_markdown_table_ratios_by_hand():
  results = [
      rounds.Result('tff', 2.0, 4.6, 0.5),
      rounds.Result('bound', 1.0, 4.6, 0.0),
      rounds.Result('scaffold', 3.0, 9.2, 0.6, own_bound='scaffold bound'),
      rounds.Result('scaffold bound', 2.5, 4.6, 0.0),
      rounds.Result('tff', 4.0, 4.6, 0.5),  # Measured again last.
  ]
  table = rounds.markdown_table(results, 'tff', 'bound', 'header')
  lines = table.splitlines()
  # x TFF against the mean of both tff rows (3.0); x own bound 3.0 / 2.5.
  assert lines[4] == '| tff | 2.00 | 0.67 | 2.00 |  | 4.6 | 0.50 |'
  assert lines[6] == '| scaffold | 3.00 | 1.00 | 3.00 | 1.20 | 9.2 | 0.60 |'
  assert lines[7] == '| scaffold bound | 2.50 | 0.83 | 2.50 |  | 4.6 | 0.00 |'


def test_markdown_table_refuses_a_missing_own_bound():
  results = [
      rounds.Result('tff', 2.0, 4.6, 0.5),
      rounds.Result('bound', 1.0, 4.6, 0.0),
      rounds.Result('scaffold', 3.0, 9.2, 0.6, own_bound='scaffold bound'),
  ]
  with pytest.raises(ValueError, match='scaffold bound'):
    rounds.markdown_table(results, 'tff', 'bound', 'header')


def test_markdown_table_repeats_give_medians_and_ranges_by_hand():
  def run(tff, bound, scaffold, own):
    return [
        rounds.Result('tff', tff, 4.6, 0.5),
        rounds.Result('bound', bound, 4.6, 0.0),
        rounds.Result('scaffold', scaffold, 9.2, 0.6, own_bound='own'),
        rounds.Result('own', own, 4.6, 0.0),
    ]

  runs = [
      run(2.0, 1.0, 3.0, 2.0),
      run(4.0, 2.0, 3.0, 1.5),
      run(3.0, 1.0, 6.0, 3.0),
  ]
  table = rounds.markdown_table(runs[0], 'tff', 'bound', 'h', repeats=runs[1:])
  lines = table.splitlines()
  # scaffold s/round 3, 3, 6: median 3.00. x TFF within each run 3/2, 3/4,
  # 6/3 = 1.5, 0.75, 2.0; x bound 3, 1.5, 6; x own 1.5, 2.0, 2.0.
  assert lines[6] == (
      '| scaffold | 3.00 (3.00-6.00) | 1.50 (0.75-2.00) | 3.00 (1.50-6.00) | '
      '2.00 (1.50-2.00) | 9.2 | 0.60 |'
  )
  # tff: 2, 4, 3 s; x TFF 1, 1, 1; x bound 2, 2, 3; no own bound.
  assert lines[4] == (
      '| tff | 3.00 (2.00-4.00) | 1.00 (1.00-1.00) | 2.00 (2.00-3.00) |  | '
      '4.6 | 0.50 |'
  )


def test_run_and_report_runs_every_other_repeat_backward(tmp_path):
  # Each row's time is its position in the order the rows were run (1, 2,
  # 3), so the table shows which order each repeat used.
  calls = []

  def row(name):
    def run(data, num_rounds):
      del data, num_rounds
      calls.append(name)
      return float(len(calls) - 3 * (len(calls) > 3)), 1.0

    return rounds.Row(name, run, num_workers=0)

  table = rounds.run_and_report(
      [row('tff'), row('bound'), row('last')],
      baseline_name='tff',
      bound_name='bound',
      rounds=1,
      clients=1,
      steps=1,
      batch_size=1,
      repeats=2,
  )
  assert calls == ['tff', 'bound', 'last', 'last', 'bound', 'tff']
  lines = table.splitlines()
  # Forward: tff 1, bound 2, last 3 s; backward: last 1, bound 2, tff 3 s.
  # Rows stay in their order; s/round median of (1, 3) is 2.00 for both.
  assert lines[4].startswith('| tff | 2.00 (1.00-3.00) |')
  assert lines[6].startswith('| last | 2.00 (1.00-3.00) |')
