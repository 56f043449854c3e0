"""The TFF workers' log files, private to their user.

A worker's stdout and stderr go to a file in a directory of this user only:
`default_log_dir()` is per user, created 0700; any log directory is opened
without following symlinks and refused in one line (`WorkerConfinementError`)
if it is a symlink, not a directory, another user's, or writable by group or
others; the file is opened relative to it, mode 0600, never via a symlink
(docs/runtime.md, 'Loopback confinement').
"""

import collections
import errno
import os
import stat
import tempfile

from tff_fedwin.runtime import loopback

LOG_TAIL_LINES = 20


def default_log_dir() -> str:
  """`$TMPDIR/tff_fedwin_workers-<euid>`: one directory per user."""
  return os.path.join(
      tempfile.gettempdir(), f'tff_fedwin_workers-{os.geteuid()}'
  )


def _refuse_log(path: str, problem: str) -> loopback.WorkerConfinementError:
  return loopback.WorkerConfinementError(
      f'Refusing TFF worker log directory {path}: {problem}.'
  )


def _open_log_dir(log_dir: str, *, tighten: bool) -> int:
  """Opens `log_dir` (created with mode 0700 if missing), never via a symlink.

  Args:
    log_dir: The directory.
    tighten: Remove group and other read access (the default directory).

  Returns:
    A file descriptor of the directory, owned by the caller.

  Raises:
    WorkerConfinementError: If `log_dir` is a symlink, not a directory, owned
      by another user, or writable by group or others.
  """
  parent = os.path.dirname(os.path.abspath(log_dir))
  os.makedirs(parent, exist_ok=True)
  try:
    os.mkdir(log_dir, 0o700)
  except FileExistsError:
    pass
  try:
    fd = os.open(
        log_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    )
  except OSError as e:
    if os.path.islink(log_dir):
      raise _refuse_log(log_dir, 'it is a symlink') from None
    raise _refuse_log(log_dir, e.strerror or str(e)) from None
  try:
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid():
      problem = (
          f'owned by uid {st.st_uid}, not by the current user '
          f'(uid {os.geteuid()})'
      )
    elif mode & 0o022:
      problem = f'writable by group or others (mode {mode:04o})'
    else:
      if tighten and mode & 0o077:
        os.fchmod(fd, 0o700)
      return fd
  except BaseException:
    os.close(fd)
    raise
  os.close(fd)
  raise _refuse_log(log_dir, problem)


def open_log(log_dir: str, name: str, *, tighten: bool) -> int:
  """Opens `log_dir/name` to append (mode 0600), never via a symlink.

  Returns:
    A file descriptor, owned by the caller.

  Raises:
    WorkerConfinementError: As `_open_log_dir`, or if `name` there is a
      symlink, not a regular file or not owned by this user.
  """
  dir_fd = _open_log_dir(log_dir, tighten=tighten)
  path = os.path.join(log_dir, name)
  try:
    fd = os.open(
        name,
        os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=dir_fd,
    )
  except OSError as e:
    reason = 'it is a symlink' if e.errno == errno.ELOOP else e.strerror
    raise loopback.WorkerConfinementError(
        f'Refusing TFF worker log file {path}: {reason}.'
    ) from None
  finally:
    os.close(dir_fd)
  st = os.fstat(fd)
  if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
    if stat.S_IMODE(st.st_mode) & 0o077:
      os.fchmod(fd, 0o600)
    return fd
  os.close(fd)
  raise loopback.WorkerConfinementError(
      f'Refusing TFF worker log file {path}: not a regular file owned by the '
      f'current user (uid {os.geteuid()}).'
  )


def tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
  """The last `lines` lines of a log, read without following a symlink."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with open(fd, errors='replace') as f:
      return ''.join(collections.deque(f, maxlen=lines))
  except OSError:
    return '<no log>'
