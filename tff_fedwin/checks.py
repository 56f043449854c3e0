"""Argument checks shared by the library and the experiment layer.

Each check raises a one-line `ValueError` that names the argument and what is
allowed, and returns the value converted to a plain Python type. A `name`
starting with `--` is shown as is (a flag); any other name is shown in
backquotes (a Python argument).
"""

import math
import numbers
import os
from collections.abc import Collection
from typing import Any, Optional


def display_name(name: str) -> str:
  """`--flag` stays as is; `arg` becomes `` `arg` ``."""
  return name if name.startswith('--') else f'`{name}`'


def _is_bool(value: Any) -> bool:
  return isinstance(value, bool) or type(value).__name__ == 'bool_'


def _bounds_text(minimum: Any, maximum: Any, *, exclusive_minimum: bool) -> str:
  parts = []
  if minimum is not None:
    parts.append(f'> {minimum}' if exclusive_minimum else f'>= {minimum}')
  if maximum is not None:
    parts.append(f'<= {maximum}')
  return (' ' + ' and '.join(parts)) if parts else ''


def check_int(
    name: str,
    value: Any,
    *,
    minimum: Optional[int] = None,
    maximum: Optional[int] = None,
) -> int:
  """Returns `int(value)` if it is an integer (not a bool) in range.

  Args:
    name: The argument's name (`--flag` or a Python argument name).
    value: The value to check; Python and numpy integers are accepted.
    minimum: The smallest allowed value, or `None`.
    maximum: The largest allowed value, or `None`.

  Raises:
    ValueError: naming `name`, if `value` is not an integer in range.
  """
  wanted = 'an integer' + _bounds_text(
      minimum, maximum, exclusive_minimum=False
  )
  if _is_bool(value) or not isinstance(value, numbers.Integral):
    raise ValueError(f'{display_name(name)} must be {wanted}, got {value!r}.')
  if (minimum is not None and value < minimum) or (
      maximum is not None and value > maximum
  ):
    raise ValueError(f'{display_name(name)} must be {wanted}, got {value!r}.')
  return int(value)


def check_number(
    name: str,
    value: Any,
    *,
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
    positive: bool = False,
    allow_infinity: bool = False,
) -> float:
  """Returns `float(value)` if it is a real number (not a bool) in range.

  NaN is always refused; infinities only with `allow_infinity`.

  Args:
    name: The argument's name (`--flag` or a Python argument name).
    value: The value to check; Python and numpy reals are accepted.
    minimum: The smallest allowed value (inclusive), or `None`.
    maximum: The largest allowed value (inclusive), or `None`.
    positive: Whether the value must be > 0 (then `minimum` is ignored).
    allow_infinity: Whether +-inf pass (subject to the bounds).

  Raises:
    ValueError: naming `name`, if `value` is not a real number in range.
  """
  lower = 0 if positive else minimum
  wanted = 'a number' + _bounds_text(lower, maximum, exclusive_minimum=positive)
  if _is_bool(value) or not isinstance(value, numbers.Real):
    raise ValueError(f'{display_name(name)} must be {wanted}, got {value!r}.')
  number = float(value)
  out_of_range = (
      math.isnan(number)
      or (math.isinf(number) and not allow_infinity)
      or (positive and not number > 0)
      or (not positive and minimum is not None and number < minimum)
      or (maximum is not None and number > maximum)
  )
  if out_of_range:
    raise ValueError(f'{display_name(name)} must be {wanted}, got {value!r}.')
  return number


def check_choice(name: str, value: Any, allowed: Collection[str]) -> str:
  """Returns `value` if it is one of `allowed` (strings).

  Raises:
    ValueError: naming `name` and listing `allowed`, otherwise.
  """
  if not isinstance(value, str) or value not in allowed:
    raise ValueError(
        f'{display_name(name)} must be one of '
        f'{", ".join(allowed)}; got {value!r}.'
    )
  return value


def is_directory_name(name: Any) -> bool:
  """Whether `name` is one non-empty directory name (no path separators)."""
  return (
      isinstance(name, str)
      and bool(name)
      and name not in ('.', '..')
      and os.sep not in name
      and not (os.altsep and os.altsep in name)
  )
