"""One process per run directory: an exclusive lock on `<run_dir>/.lock`.

`hold(run_dir)` takes `fcntl.flock(LOCK_EX | LOCK_NB)` on the run directory's
`.lock` file (creating the directory and the file if missing, the only things
made before the lock) and writes the holder's pid into it. A second process
gets `RunDirectoryLockedError` at once, naming the directory and that pid.
The kernel releases a flock when its holder dies, even by SIGKILL, so a
killed run never leaves a stale lock. A nested `hold` of the same directory
in the same process is a no-op (a fork trains its trunk under its own lock).
Every writer of a run directory holds it: `experiments.run_experiment`, the
forks, the benchmarks that train.

`hold(directory, locked_error=TransferDirectoryLockedError)` holds a run's
transfer directory in `--shared_dir` the same way (`experiments.run`), with
its own one line.
"""

import contextlib
import errno
import fcntl
import os
import shutil
import threading
from collections.abc import Iterator

from tff_fedwin import errors

LOCK_FILE = '.lock'

# The directories this process holds: real path -> [fd, nesting depth].
_HELD: dict[str, list[int]] = {}
_HELD_GUARD = threading.Lock()
# A lock file removed or replaced between its open and its lock is opened
# again; more attempts than this mean something keeps replacing it.
_ATTEMPTS = 10


class RunDirectoryLockedError(errors.RunDirectoryError, RuntimeError):
  """Another process holds the run directory (`hold`).

  Attributes:
    run_dir: The directory.
    pid: The holder's pid as its lock file says, or None if unknown.
  """

  def __init__(self, run_dir: str, pid):
    super().__init__(self.message(run_dir, pid))
    self.run_dir = run_dir
    self.pid = pid

  @staticmethod
  def message(run_dir: str, pid) -> str:
    holder = f'pid {pid}' if pid is not None else 'a process'
    return (
        f'{run_dir} is in use by another run ({holder} holds '
        f'{os.path.join(run_dir, LOCK_FILE)}); one process at a time writes '
        'a run directory: wait for it to end, or use another --experiment_name.'
    )


class TransferDirectoryLockedError(RunDirectoryLockedError):
  """Another driver holds a run's transfer directory in `--shared_dir`.

  The directory is named by the run id of the run directory's
  `run_config.json`: two drivers of one run (one run directory resumed twice
  at once, e.g. from two hosts, or a copy of it) would read each other's
  per-round files.

  Attributes:
    run_dir: The transfer directory.
    pid: The holder's pid as its lock file says (on the holder's host), or
      None if unknown.
  """

  @staticmethod
  def message(run_dir: str, pid) -> str:
    holder = f'pid {pid} on its host' if pid is not None else 'a process'
    return (
        f'{run_dir} is in use by another driver ({holder} holds '
        f'{os.path.join(run_dir, LOCK_FILE)}): it holds the transfer files '
        'of one run, named by the run_id in its run_config.json, and that run '
        'is running elsewhere (the same run directory resumed twice, or a '
        'copy of it); stop the other driver, or give a copy its own id by '
        'deleting run_id from its run_config.json.'
    )


def holder_pid(run_dir: str):
  """The pid written in `run_dir`'s lock file, or None (none or unreadable)."""
  try:
    with open(os.path.join(run_dir, LOCK_FILE)) as f:
      text = f.read().strip()
  except OSError:
    return None
  return int(text) if text.isdecimal() else None


def _same_file(fd: int, path: str) -> bool:
  """Whether `path` still names the file open as `fd` (not removed since)."""
  try:
    on_disk = os.stat(path)
  except FileNotFoundError:
    return False
  held = os.fstat(fd)
  return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def _acquire(run_dir: str, locked_error) -> int:
  """Locks `run_dir/.lock`; returns its descriptor, the pid written in it.

  `locked_error(run_dir, pid)` is raised if another process holds it.
  """
  path = os.path.join(run_dir, LOCK_FILE)
  for _ in range(_ATTEMPTS):
    os.makedirs(run_dir, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      os.close(fd)
      if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise
      raise locked_error(run_dir, holder_pid(run_dir)) from None
    if _same_file(fd, path):
      os.ftruncate(fd, 0)
      os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
      return fd
    os.close(fd)  # Removed after our open (e.g. a run dir deleted): again.
  raise RuntimeError(f'{path} keeps being replaced; cannot lock it.')


def _release(fd: int) -> None:
  """Empties the lock file (no stale pid) and unlocks it by closing it."""
  try:
    os.ftruncate(fd, 0)
  except OSError:
    pass
  os.close(fd)


@contextlib.contextmanager
def hold(
    run_dir: str,
    locked_error: type[RunDirectoryLockedError] = RunDirectoryLockedError,
) -> Iterator[None]:
  """Holds `run_dir` for this process while the block runs.

  Args:
    run_dir: The run directory (or a run's transfer directory); it and its
      `.lock` are created if missing.
    locked_error: The class raised if another process holds it, called
      with the directory and the holder's pid.

  Raises:
    RunDirectoryLockedError: (`locked_error`) If another process holds it
      (nothing in the directory is changed then).
  """
  run_dir = os.fspath(run_dir)
  key = os.path.realpath(run_dir)
  with _HELD_GUARD:
    if key in _HELD:
      _HELD[key][1] += 1
    else:
      _HELD[key] = [_acquire(run_dir, locked_error), 1]
  try:
    yield
  finally:
    with _HELD_GUARD:
      _HELD[key][1] -= 1
      if not _HELD[key][1]:
        _release(_HELD.pop(key)[0])


def is_held(run_dir: str) -> bool:
  """Whether this process holds `run_dir` (`hold`)."""
  with _HELD_GUARD:
    return os.path.realpath(os.fspath(run_dir)) in _HELD


def clear_held(run_dir: str) -> None:
  """Removes everything in `run_dir` but its lock (a benchmark's fresh start).

  Raises:
    RuntimeError: If this process does not hold `run_dir`.
  """
  if not is_held(run_dir):
    raise RuntimeError(f'{run_dir} is not held by this process (`hold`).')
  for entry in os.scandir(run_dir):
    if entry.name == LOCK_FILE:
      continue
    if entry.is_dir(follow_symlinks=False):
      shutil.rmtree(entry.path)
    else:
      os.remove(entry.path)
