"""Whether a LEAF cache's directories may be used: this user's own, real.

`leaf_cache` uses `<cache_dir>`, `<cache_dir>/stat_keys/` and an entry
`<cache_dir>/<key>/` only when `foreign` finds nothing against it: each is a
directory (by `os.lstat`: not a symbolic link) owned by this process's
effective user. Anything else (a shared `--cache_dir`'s entry another user
wrote, a symbolic link planted where a conversion belongs) is never read,
written, renamed over or deleted: the load logs one warning naming it and
converts into `private_directory`, a fresh directory of mode 0700 in
`$TMPDIR` (`tempfile.gettempdir()`), which is left there for the user (the
warning names it); workers on other hosts do not see it, so they need a
`--cache_dir` of the user's own.

Reading an entry of ours, only a missing file (`DAMAGE_ERRNOS`) means a
damaged or half-removed conversion, converted again; any other `OSError`
(EIO, ENOSPC, EMFILE, EACCES, ...) may pass, and another run's workers may
be reading the entry: `unreadable` is the one-line error that leaves it.
"""

import errno
import os
import stat
import tempfile
from typing import Optional

from absl import logging

from tff_fedwin import errors

# A missing index or client file: a damaged conversion, converted again.
DAMAGE_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR})
# `private_directory`'s prefix in `$TMPDIR`.
PRIVATE_PREFIX = 'tff_fedwin-leaf-'


class LeafCacheError(errors.EnvironmentProblemError):
  """A LEAF cache entry could not be read now; it is left as it is."""


def foreign(path: str) -> Optional[str]:
  """Why `path` is not this user's own directory; None if it is (or absent).

  Raises:
    LeafCacheError: If `path` cannot be examined (one line).
  """
  try:
    info = os.lstat(path)
  except FileNotFoundError:
    return None
  except OSError as e:
    raise unreadable(path, e) from None
  if stat.S_ISLNK(info.st_mode):
    return f'{path} is a symbolic link, not a directory of this user'
  if not stat.S_ISDIR(info.st_mode):
    return f'{path} is not a directory'
  if info.st_uid != os.geteuid():
    return (
        f'{path} is owned by uid {info.st_uid}, not by this user (uid '
        f'{os.geteuid()})'
    )
  return None


def unreadable(path: str, error: OSError) -> LeafCacheError:
  """The one-line error of an entry that cannot be read now (left as is)."""
  code = errno.errorcode.get(error.errno, error.errno)
  return LeafCacheError(
      f'{path}: cannot read the LEAF cache ({code}: {error.strerror}); it is '
      'left as it is (another run may be using it): run again when the '
      'file system recovers, or pass another --cache_dir'
  )


def private_directory(key: str, problem: str) -> str:
  """A fresh directory (mode 0700) for a conversion of `key` of our own.

  Logs one warning: `problem`, and where the conversion goes instead.
  """
  directory = tempfile.mkdtemp(prefix=f'{PRIVATE_PREFIX}{key}-')
  logging.warning(
      '%s: not used; the LEAF data are converted into the private directory '
      '%s instead (mode 0700, left for you to delete; remote workers need a '
      '--cache_dir of your own)',
      problem,
      directory,
  )
  return directory


def read_key(path: str) -> Optional[str]:
  """The content key a stat-key file of this user remembers, or None."""
  try:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
      return None
    with open(path) as f:
      key = f.read(33)
  except OSError:
    return None
  return key if len(key) == 32 and key.isalnum() else None


def write_key(path: str, key: str) -> None:
  """Remembers `key` in the stat-key file `path` (atomically)."""
  if read_key(path) == key:
    return
  directory, name = os.path.split(path)
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f'{name}.tmp-', dir=directory)
  with os.fdopen(fd, 'w') as f:
    f.write(key)
  os.replace(tmp, path)
