"""Tests for tff_fedwin.experiments.config: the flags' checks.

`BASE` (tests/experiments/config_fixtures.py) is a valid configuration; each
case breaks one field (or two) and the error must name the flag(s); the
accepted cases sit at the edges of what is allowed, and where a bound is
numeric the rejected case is the first value past it (e.g. `--seed` 0 is
accepted, -1 rejected).
"""

import re

import attrs
import pytest

from tests.experiments import config_accepted_cases
from tests.experiments import config_fixtures
from tests.experiments import config_rejected_cases
from tff_fedwin import experiments

BASE = config_fixtures.BASE
BAD_CONFIGS = config_rejected_cases.BAD_CONFIGS
GOOD_CONFIGS = config_accepted_cases.GOOD_CONFIGS


@pytest.mark.parametrize('overrides, flags', BAD_CONFIGS)
def test_validate_config_names_the_flag(overrides, flags):
  config = attrs.evolve(BASE, **overrides)
  with pytest.raises(ValueError, match=re.escape(flags[0])) as raised:
    experiments.validate_config(config)
  for flag in flags[1:]:
    assert flag in str(raised.value)


@pytest.mark.parametrize('overrides', GOOD_CONFIGS)
def test_validate_config_accepts(overrides):
  config = attrs.evolve(BASE, **overrides)

  assert experiments.validate_config(config) is None
  assert config == attrs.evolve(BASE, **overrides)  # Not changed.


@pytest.mark.parametrize(
    'window_sizes, expected', [('', ()), (' ', ()), ('5, 1,10', (5, 1, 10))]
)
def test_parse_window_sizes(window_sizes, expected):
  config = attrs.evolve(BASE, window_size=2, window_sizes=window_sizes)
  assert experiments.parse_window_sizes(config) == expected
