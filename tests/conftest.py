"""Session-wide TFF execution context on a managed worker.

Every test runs its computations on one `worker_binary` that this session starts
and stops (`tff_fedwin.runtime.local_execution_context`), so no worker outlives
the test run and none writes to pytest's captured streams.
"""

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
