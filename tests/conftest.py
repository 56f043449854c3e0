"""Session-wide TFF execution context on a managed worker.

Every test runs its computations on one `worker_binary` that this session starts
and stops (`tff_fedwin.runtime.local_execution_context`), so no worker outlives
the test run and none writes to pytest's captured streams.
"""

import logging

from absl import logging as absl_logging
import pytest

from tff_fedwin import log_levels

log_levels.quiet_native_logs(['pytest'])  # Before TensorFlow is imported.

from tff_fedwin import runtime  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture(scope='session', autouse=True)
def tff_execution_context(tmp_path_factory):
  with runtime.local_execution_context(
      log_dir=str(tmp_path_factory.mktemp('tff_workers'))
  ) as context:
    yield context


@pytest.fixture
def keep_log_levels():
  """Restores absl's verbosity and the `tensorflow` logger's level."""
  absl_level = absl_logging.get_verbosity()
  tf_level = logging.getLogger('tensorflow').level
  yield
  absl_logging.set_verbosity(absl_level)
  logging.getLogger('tensorflow').setLevel(tf_level)


# `pytest --file-costs=PATH`: the cost of every test file (tests/file_costs.py).
from tests.file_costs import pytest_addoption  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
from tests.file_costs import pytest_configure  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
from tests.file_costs import pytest_runtest_protocol  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
from tests.file_costs import pytest_unconfigure  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
