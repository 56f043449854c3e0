"""Every problem of one command line, one line each (`validate_config`).

`Problems` collects the one-line messages of independent checks, so a
command line with three mistakes is told all three at once; `listed` writes
a choice's names for such a message and `given` says whether a flag is set.
Importable without TensorFlow.
"""

import contextlib
from typing import Any

import attrs


def given(config: Any, flag: str) -> bool:
  """Whether `config` (an `ExperimentConfig`) sets `flag` off its default."""
  return getattr(config, flag) != attrs.fields_dict(type(config))[flag].default


def listed(names, last: str = 'or') -> str:
  """('a', 'b', 'c') -> 'a, b or c': the names of a choice for a message."""
  *others, final = names
  return f'{", ".join(others)} {last} {final}' if others else final


class Problems:
  """The problems of one configuration, collected rather than raised one by one.

  Each check of `validate_config` is independent: a condition that fails
  `add`s its one-line message (naming the flags), a call that raises a
  ValueError (`checks.check_int`, ...) runs in `with problems.check():`, which
  records the message and lets the next check run. A check that needs an
  earlier one to pass goes in the same block, or after `raise_if_any`.
  """

  def __init__(self):
    self._lines = []

  def add(self, message: str) -> None:
    """Records `message` (one line per problem; a repeated line once)."""
    for line in message.splitlines():
      if line not in self._lines:
        self._lines.append(line)

  @contextlib.contextmanager
  def check(self):
    """Records the ValueError of the block, which ends; the caller goes on."""
    try:
      yield
    except ValueError as e:
      self.add(str(e))

  def raise_if_any(self) -> None:
    """Raises ValueError with every problem so far, one line each."""
    if self._lines:
      raise ValueError('\n'.join(self._lines))
