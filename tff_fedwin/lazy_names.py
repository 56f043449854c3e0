"""Package names imported on first use (PEP 562), for TF-free package imports.

`tff_fedwin.experiments`, `tff_fedwin.tasks` and `tff_fedwin.data` import
their light modules at once and the names that need TensorFlow and TFF only
when first read, so a script checks its flags and data files before the heavy
imports.
"""

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def module_hooks(
    package: str, heavy: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
  """`__getattr__` and `__dir__` of `package` for its `heavy` names.

  Args:
    package: The package's `__name__`.
    heavy: name -> the module that defines it, imported on first use.
    namespace: The package's `globals()`; a name read once is kept there.

  Returns:
    `(__getattr__, __dir__)` to assign in the package's `__init__`.
  """

  def getattr_(name: str) -> Any:
    if name not in heavy:
      raise AttributeError(f'module {package!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(heavy[name]), name)
    namespace[name] = value
    return value

  def dir_() -> list[str]:
    return sorted([*namespace, *heavy])

  return getattr_, dir_
