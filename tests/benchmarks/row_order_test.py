"""`row_order`: which benchmark rows run, and in which order per repeat."""

import pytest

from benchmarks import rounds
from benchmarks import row_order


def _row(name, own_bound=None):
  return rounds.Row(name, run=None, own_bound=own_bound)


_ROWS = [
    _row('tff'),
    _row('fed_win', own_bound='bound'),
    _row('fed_win, reduce'),
    _row('bound'),
    _row('wsm', own_bound='wsm bound'),
    _row('wsm bound'),
    _row('scaffold', own_bound='scaffold bound'),
    _row('scaffold bound'),
    _row('tff'),
]


@pytest.mark.parametrize(
    'pattern, expected',
    [
        # The references (tff first and last, bound) always come along.
        ('^fed_win$', ['tff', 'fed_win', 'bound', 'tff']),
        # A matched row brings its own bound.
        ('^wsm$', ['tff', 'bound', 'wsm', 'wsm bound', 'tff']),
        (
            'reduce|scaffold$',
            [
                'tff',
                'fed_win, reduce',
                'bound',
                'scaffold',
                'scaffold bound',
                'tff',
            ],
        ),
        ('', [r.name for r in _ROWS]),
    ],
)
def test_select_keeps_matches_their_own_bounds_and_references(
    pattern, expected
):
  kept = row_order.select(_ROWS, pattern, ('tff', 'bound'))
  assert [r.name for r in kept] == expected


@pytest.mark.parametrize(
    'pattern, message',
    [('fedprox', 'matches no row'), ('(', 'regular expression')],
)
def test_select_names_the_flag_for_a_bad_pattern(pattern, message):
  with pytest.raises(ValueError, match=rf'--rows.*{message}'):
    row_order.select(_ROWS, pattern, ('tff', 'bound'))


def test_run_order_alternates_forward_and_backward():
  assert row_order.run_order(3, 0) == [0, 1, 2]
  assert row_order.run_order(3, 1) == [2, 1, 0]
  assert row_order.run_order(3, 2) == [0, 1, 2]
