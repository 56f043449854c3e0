"""What a quiet script's stderr must not hold (tff_fedwin.log_levels).

None of TensorFlow's INFO lines (grappler sessions from TFF's compiler in the
driver, oneDNN, CUDA stubs), gRPC's fork lines or absl's INFO lines. Shared by
tests/scripts/quiet_scripts_test.py and the benchmark runs of
tests/scripts/scripts_smoke_test.py, which check their own runs' stderr
instead of running the benchmarks a second time.
"""

import re

# TF's C++ INFO line: "2026-12-01 19:38:55.990096: I tensorflow/core/...".
NATIVE_INFO = re.compile(r'^\d{4}-\d\d-\d\d [\d:.]+: I tensorflow/', re.M)
# absl's INFO line: "I1201 19:38:53.283362 139982205467520 keras_utils.py:400]".
ABSL_INFO = re.compile(r'^I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]', re.M)
_NOISE_MARKS = ('grappler', 'oneDNN', 'fork()', 'INFO:tensorflow')


def assert_quiet(stderr: str) -> None:
  """Fails if `stderr` holds any of the lines a quiet script leaves out."""
  assert not NATIVE_INFO.search(stderr), stderr[-3000:]
  assert not ABSL_INFO.search(stderr), stderr[-3000:]
  for mark in _NOISE_MARKS:
    assert mark not in stderr, stderr[-3000:]
