"""Tests for tff_fedwin.data.leaf_kinds: a LEAF row and label -> its kind."""

import pytest

from tff_fedwin.data import leaf_kinds


@pytest.mark.parametrize(
    'row, label, kind',
    [
        ([0.0] * 783 + [1.0], 5, 'femnist'),
        # Not all numbers: FEMNIST's checks name the value.
        ([0.5] * 400 + ['x'] + [0.5] * 383, 5, 'femnist'),
        ([0.5] * 783 + ['x'], 5, 'sent140'),  # Ends in a string.
        ([0.5] * 783 + [1.5], 5, 'synthetic'),  # 784 wide, outside [0, 1].
        ([-0.3, 2.1], 0, 'synthetic'),
        ([0.5] * 783, 0, 'synthetic'),
        ('to be or not to be', 'x', 'shakespeare'),
        ('000001.jpg', 1.0, 'celeba'),
        ('000001.png', None, 'celeba'),
        ('a face', 0, 'celeba'),  # A number as y: not a next character.
        (['1467810369', 'Mon Apr 06', 'NO_QUERY', 'u', 'hi'], 1, 'sent140'),
        ([['<BOS>', 'hi']], None, 'reddit'),
        ('hi there', {'target_tokens': []}, 'reddit'),
        (7, 0, None),
    ],
)
def test_kind_of(row, label, kind):
  assert leaf_kinds.kind_of(row, label) == kind


@pytest.mark.parametrize(
    'value, number', [(1, True), (0.5, True), (True, False), (2**63, False)]
)
def test_is_number(value, number):
  assert leaf_kinds.is_number(value) is number
