"""Releases TFF's import-time default context before the interpreter tears down.

At exit, before module teardown, the default context is replaced and the old
one garbage-collected, so that its `__del__` stops any worker TFF started and
prints no spurious traceback (docs/runtime.md, 'Why we manage the worker
ourselves'). The `atexit` hook that calls `release_default_context` is
registered by `tff_fedwin/__init__.py`, so that any import of the package
installs it, not only `tff_fedwin.runtime`'s.
"""

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
