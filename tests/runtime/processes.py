"""Test helpers: whether a process is alive, from /proc."""

import time


def pid_alive(pid: int) -> bool:
  """True if `pid` exists and is not a zombie."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(')')[-1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


def wait_until_dead(pid: int, timeout_seconds: float = 20.0) -> bool:
  """Whether `pid` is gone (or a zombie) within `timeout_seconds`."""
  deadline = time.monotonic() + timeout_seconds
  while time.monotonic() < deadline:
    if not pid_alive(pid):
      return True
    time.sleep(0.1)
  return False
