"""Fixtures shared by the tests of tff_fedwin.training.loop.run_training."""

import pytest

from tests import softmax_task as task


@pytest.fixture(scope='module')
def processes():
  return task.build_processes()
