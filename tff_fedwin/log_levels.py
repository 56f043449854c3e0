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

`run` also imports TensorFlow while absl is still initializing (after the
flags and the script's own `before_tensorflow` checks), never later:
`tensorflow.python.distribute.combinations`, imported by TensorFlow, registers
`absl.app.call_after_init(...)` to list the GPUs; once absl's init is done it
runs at once, in the middle of TensorFlow's import, and Keras then builds
functional models in graph mode (every LSTM fails with "'SymbolicTensor'
object cannot be interpreted as an integer").

This module imports TensorFlow only inside `run`, after the checks.
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


def quiet() -> None:
  """The scripts' quiet logs for library use; call it before importing TF.

  `quiet_native_logs` without a command line, then `set_python_log_levels`:
  TensorFlow's and gRPC's C++ INFO and WARNING lines (grappler's sessions,
  oneDNN, CUDA stubs) are filtered, and absl and the `tensorflow` logger show
  warnings and errors only. A variable of `QUIET_NATIVE_ENV` the environment
  sets is left alone. Called after TensorFlow's import, only the Python
  levels take effect (the C++ level is read once, at the import).
  """
  quiet_native_logs([])
  set_python_log_levels(False)


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
    main: Callable[[Any], Any],
    argv: Optional[Sequence[str]] = None,
    *,
    before_tensorflow: Optional[Callable[[list[str]], Any]] = None,
    import_tensorflow: bool = True,
) -> None:
  """`absl.app.run(main, argv)` at quiet log levels, TensorFlow imported early.

  absl parses the flags; then `set_python_log_levels` (warnings and errors
  only unless `argv` sets `--verbosity`), `before_tensorflow` (the script's
  checks of flags and files, if any), and TensorFlow's import, all inside
  absl's flag parsing (see the module docstring for why not later); then
  `main` runs with `before_tensorflow`'s result (or the arguments left) and
  the script exits with its result, as `app.run` does. The C++ logs are
  `quiet_native_logs`'s: the script calls it before importing TensorFlow.

  Args:
    main: The script's main.
    argv: The command line; default `sys.argv`.
    before_tensorflow: Called with the non-flag arguments; what it returns is
      `main`'s argument. Its errors leave before TensorFlow is imported.
    import_tensorflow: False for a script whose own process never imports
      TensorFlow (it only starts others).
  """
  argv = list(sys.argv if argv is None else argv)
  verbosity_set = verbosity_requested(argv)

  def parse_check_and_import(args: list[str]) -> Any:
    args = app.parse_flags_with_usage(args)
    set_python_log_levels(verbosity_set)
    checked = before_tensorflow(args) if before_tensorflow else args
    if import_tensorflow:
      import tensorflow  # pylint: disable=g-import-not-at-top,unused-import

    return checked

  def quiet_main(checked: Any) -> Any:
    set_python_log_levels(verbosity_set)  # absl set INFO after parsing.
    return main(checked)

  app.run(quiet_main, argv=argv, flags_parser=parse_check_and_import)
