"""Fixtures shared by the whole-run tests of tff_fedwin.experiments."""

import pytest

from tests.experiments import tiny_data


@pytest.fixture(scope='module')
def data_npz(tmp_path_factory):
  """`tiny_data`'s task written to a temporary `.npz` (once per module)."""
  return tiny_data.write_npz(str(tmp_path_factory.mktemp('data') / 'tiny.npz'))
