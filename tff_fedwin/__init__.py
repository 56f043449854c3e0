"""tff_fedwin: window-based model averaging for heterogeneous FL in TFF."""

import atexit as _atexit
import importlib as _importlib
import sys as _sys

from tff_fedwin.version import __version__


def _release_tff_default_context() -> None:
  """At exit, releases TFF's default context if TFF was imported.

  Registered here, so that every import of the package installs it whatever
  the subpackage (`aggregators` imports TFF without `runtime`); it imports
  nothing when TFF was never imported (`runtime/default_context.py`).
  """
  if 'tensorflow_federated' in _sys.modules:
    _importlib.import_module(
        'tff_fedwin.runtime.default_context'
    ).release_default_context()


_atexit.register(_release_tff_default_context)
