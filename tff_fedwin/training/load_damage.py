"""Which failed loads of a program state are damage to its files.

A resume sets a checkpoint version aside (`Checkpoints.resume`) only when its
data is damaged; an error of the machine (memory, I/O, a TF resource) is
raised with nothing moved (docs/design.md sec. 5.3.1).
"""

import errno

import tensorflow as tf

# TF's codes of a load that failed on the files' bytes (`is_damage`).
_DAMAGE_CODES = frozenset(
    (
        tf.errors.UNKNOWN,  # A missing or zero-filled variables file.
        tf.errors.NOT_FOUND,
        tf.errors.DATA_LOSS,  # A flipped byte in a variables file.
        tf.errors.INVALID_ARGUMENT,
        tf.errors.OUT_OF_RANGE,
    )
)


def is_damage(error: Exception) -> bool:
  """Whether a program state's load failed on its data (damage).

  What TF 2.14 raises for damaged program-state files, measured: a truncated
  or missing `saved_model.pb` an `OSError` without an errno, a zero-filled
  one a `ValueError`, a missing or zero-filled variables file an `OpError`
  with code UNKNOWN, a flipped byte in one a `DataLossError`. Anything else
  is the machine, not the files (a `MemoryError`, an `OSError` with an errno
  other than ENOENT such as EIO or EMFILE, TF's RESOURCE_EXHAUSTED or
  UNAVAILABLE) and never moves a version aside (docs/design.md sec. 5.3.1).
  """
  if isinstance(error, tf.errors.OpError):
    return error.error_code in _DAMAGE_CODES
  if isinstance(error, OSError):
    return error.errno in (None, errno.ENOENT)
  return isinstance(error, ValueError)
