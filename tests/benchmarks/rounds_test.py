"""`rounds.markdown_table`: ratios to TFF, to the bound and to own bounds."""

import pytest

from tff_fedwin.benchmarks import rounds


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
