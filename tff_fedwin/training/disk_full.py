"""A full disk ends a run with one line: the path and the space needed.

A checkpoint is complete only once its manifest is written, last
(`checkpoint_manifest`), so a write that fails for lack of space leaves the
previous checkpoint the newest intact one; after space is freed, the same
command resumes from it (docs/design.md sec. 5.3).
"""

import contextlib
import errno
from collections.abc import Iterator
from typing import Any, Optional

import tensorflow as tf

from tff_fedwin.training import checkpoints as checkpoints_lib

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_SPACE_TEXT = ('no space left on device', 'disk quota exceeded')


def _no_space(error: BaseException) -> Optional[BaseException]:
  """The exception in `error`'s chain that reports a full disk, or None."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in _NO_SPACE:
      return error
    if isinstance(error, tf.errors.OpError) and any(
        text in str(error.message).lower() for text in _NO_SPACE_TEXT
    ):
      return error
    error = error.__cause__ or error.__context__
  return None


def _megabytes(nbytes: int) -> str:
  return f'{max(nbytes, 1) / 1e6:.1f} MB'


def message(error: BaseException, checkpoints: Optional[Any]) -> str:
  """The one line for a full disk: what was written, what to free, how on."""
  if isinstance(error, OSError) and error.filename:
    what = f'writing {error.filename}'
  elif isinstance(error, tf.errors.OpError):
    what = f'({" ".join(str(error.message).split())[:200]})'
  elif checkpoints is not None:
    what = f'writing into {checkpoints.directory}'
  else:
    what = "writing the run's files"
  text = f'The disk is full: no space left on device {what}.'
  if checkpoints is None:
    return text + ' Free space and rerun the same command.'
  needed = checkpoints.last_checkpoint_bytes()
  resume = checkpoints.resume_round()
  if needed:
    text += (
        f' Free at least {_megabytes(needed)} (the size of the last '
        'checkpoint) on that file system'
    )
  else:
    text += ' Free space on that file system'
  if resume is not None:
    text += (
        ' and rerun the same command: it resumes from the checkpoint of round '
        f'{resume}.'
    )
  else:
    text += ' and rerun the same command.'
  return text


@contextlib.contextmanager
def as_one_line(checkpoints: Optional[Any]) -> Iterator[None]:
  """Turns a full-disk error in the block into `DiskFullError`."""
  try:
    yield
  except checkpoints_lib.DiskFullError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    full = _no_space(e)
    if full is None:
      raise
    raise checkpoints_lib.DiskFullError(message(full, checkpoints)) from None
