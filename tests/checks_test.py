"""Tests of `tff_fedwin.checks`."""

import math

import numpy as np
import pytest

from tff_fedwin import checks


@pytest.mark.parametrize('value', [0, 3, np.int64(2), np.int32(7)])
def test_check_int_accepts_integers_in_range(value):
  assert checks.check_int('n', value, minimum=0, maximum=7) == int(value)
  assert type(checks.check_int('n', value)) is int


@pytest.mark.parametrize('value', [True, np.bool_(True), 1.0, '1', None, -1, 8])
def test_check_int_refuses_with_one_line_naming_argument(value):
  with pytest.raises(
      ValueError, match=r'^`n` must be an integer >= 0 and ' r'<= 7, got .*\.$'
  ) as info:
    checks.check_int('n', value, minimum=0, maximum=7)
  assert '\n' not in str(info.value)


def test_flag_names_are_shown_as_flags():
  with pytest.raises(
      ValueError, match=r'^--total_rounds must be an integer ' r'>= 1, got 0\.$'
  ):
    checks.check_int('--total_rounds', 0, minimum=1)


@pytest.mark.parametrize('value', [0.5, 1, np.float32(2.0)])
def test_check_number_positive_accepts(value):
  assert checks.check_number('lr', value, positive=True) == float(value)


@pytest.mark.parametrize('value', [0, -0.1, math.nan, math.inf, True, 'x'])
def test_check_number_positive_refuses(value):
  with pytest.raises(ValueError, match=r'^`lr` must be a number > 0, got'):
    checks.check_number('lr', value, positive=True)


def test_check_number_bounds_and_infinity():
  assert checks.check_number('a', 0.0, minimum=0) == 0.0
  assert (
      checks.check_number('a', math.inf, minimum=0, allow_infinity=True)
      == math.inf
  )
  with pytest.raises(ValueError, match=r'>= 0 and <= 1'):
    checks.check_number('a', 1.5, minimum=0, maximum=1)
  with pytest.raises(ValueError, match='`a`'):
    checks.check_number('a', -math.inf, minimum=0, allow_infinity=True)


def test_check_choice():
  assert checks.check_choice('mode', 'b', ('a', 'b')) == 'b'
  with pytest.raises(ValueError, match=r"^`mode` must be one of a, b; got 'c'"):
    checks.check_choice('mode', 'c', ('a', 'b'))
  with pytest.raises(ValueError, match='--mode'):
    checks.check_choice('--mode', 1, ('a', 'b'))
