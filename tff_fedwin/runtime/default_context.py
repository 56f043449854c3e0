"""Releases TFF's import-time default context before the interpreter tears down.

`import tensorflow_federated` installs a local C++ context whose service
manager has a `__del__`. Left to the interpreter's final teardown, that
`__del__` runs after the `subprocess` module is gone and prints
`Exception ignored in ... ServiceManager.__del__ ... 'NoneType' object has no
attribute 'Popen'`, which users read as a crash. At exit (before teardown) we
replace the default context and collect the old one while the modules still
exist, so its `__del__` runs normally: it stops a worker if TFF started one,
and prints nothing otherwise.
"""

import atexit
import gc

import tensorflow_federated as tff


class ExitedContext(tff.framework.SyncContext):
  """The default context after exit began: any invocation is an error."""

  def invoke(self, comp, arg):
    del comp, arg
    raise RuntimeError('TFF computations cannot run while Python exits.')


def release_default_context() -> None:
  """Replaces TFF's default context and collects the old one now."""
  tff.framework.set_default_context(ExitedContext())
  gc.collect()


atexit.register(release_default_context)
