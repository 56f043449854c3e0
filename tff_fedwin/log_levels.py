"""How loud a run is: TensorFlow's native and Python logs by verbosity.

A run shows its progress lines, warnings and summary by default. TensorFlow
prints hundreds of INFO lines (grappler sessions, oneDNN, CUDA stubs) from C++
and Python; `quiet_native_logs` must run before TensorFlow is imported (the C++
level is read once), `set_python_log_levels` after flags are parsed. The
grappler lines come from the driver: TFF's compiler optimizes every TensorFlow
computation it builds with grappler, in this process; the local workers
inherit the environment and write to their log files. A script does both
steps in two lines:

  log_levels.quiet_native_logs(sys.argv)  # At its top, before TF's import.
  ...
  if __name__ == '__main__':
    log_levels.run(main)  # absl's app.run, then the Python log levels.

This module imports no TensorFlow itself.
"""

import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, Optional

from absl import app
from absl import logging as absl_logging

# Environment variable -> its quiet value: TensorFlow's C++ logs (3: INFO,
# WARNING and ERROR filtered) and gRPC's (e.g. "skipping fork() handlers" when
# a second worker starts).
QUIET_NATIVE_ENV = {'TF_CPP_MIN_LOG_LEVEL': '3', 'GRPC_VERBOSITY': 'ERROR'}
_VERBOSITY_ARG = re.compile(r'^--?(v|verbosity)(=|$)')


def verbosity_requested(argv: Sequence[str]) -> bool:
  """Whether `argv` sets absl's `--verbosity` (or `-v`) flag."""
  return any(_VERBOSITY_ARG.match(arg) for arg in argv[1:])


def quiet_native_logs(argv: Sequence[str]) -> None:
  """Silences TensorFlow's and gRPC's C++ logs unless asked for.

  Call it before importing TensorFlow. Leaves each variable of
  `QUIET_NATIVE_ENV` alone when the environment sets it, and all of them when
  `argv` sets `--verbosity`.

  Args:
    argv: The command line (`sys.argv`).
  """
  if not verbosity_requested(argv):
    for name, value in QUIET_NATIVE_ENV.items():
      os.environ.setdefault(name, value)


def set_python_log_levels(verbosity_set: bool) -> None:
  """Shows warnings and errors only, unless `--verbosity` was given.

  absl turns its default verbosity into INFO once flags are parsed, which
  shows TFF's and TensorFlow's INFO lines; this sets absl and the `tensorflow`
  logger back to WARNING. With `verbosity_set`, absl's flag rules.

  Args:
    verbosity_set: Whether the user passed `--verbosity` (`FLAGS['verbosity']
      .present`).
  """
  if verbosity_set:
    return
  absl_logging.set_verbosity(absl_logging.WARNING)
  logging.getLogger('tensorflow').setLevel(logging.WARNING)


def run(
    main: Callable[[list[str]], Any], argv: Optional[Sequence[str]] = None
) -> None:
  """`absl.app.run(main, argv)` at a script's quiet Python log levels.

  Once absl has parsed the flags, sets `set_python_log_levels` (warnings and
  errors only unless `argv` sets `--verbosity`), then runs `main` with the
  arguments left and exits with its result, as `app.run` does. The C++ logs
  are `quiet_native_logs`'s: the script calls it before importing TensorFlow.

  Args:
    main: The script's main, called with the non-flag arguments.
    argv: The command line; default `sys.argv`.
  """
  argv = list(sys.argv if argv is None else argv)
  verbosity_set = verbosity_requested(argv)

  def quiet_main(args: list[str]) -> Any:
    set_python_log_levels(verbosity_set)
    return main(args)

  app.run(quiet_main, argv=argv)
