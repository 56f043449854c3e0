"""Test helpers: whether a process is alive, from /proc; a fragmented heap."""

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


# Python source that frees ~195 MB in the middle of the heap and records the
# RSS in `before`: 50,000 blocks of 4 KB (above pymalloc's 512 B, below
# glibc's mmap threshold, so they come from the main heap), all freed but the
# last, so the freed span is not at the top of the heap, where free() alone
# would return it. `rss_kb()` reads VmRSS. Append the code that waits.
FRAGMENTED_HEAP_SCRIPT = """
def rss_kb():
  with open('/proc/self/status') as f:
    return next(int(l.split()[1]) for l in f if l.startswith('VmRSS:'))

blocks = [bytearray(4096) for _ in range(50_000)]
last = blocks[-1]
del blocks
before = rss_kb()
"""
