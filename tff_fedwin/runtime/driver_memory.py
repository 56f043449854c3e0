"""A periodic `malloc_trim(0)` in this process (the driver) while TFF runs.

A SCAFFOLD round of 50 clients of the 1.2M-parameter CNN moves 2 x 241 MB of
client states through TFF's value serialization in the driver; glibc keeps the
freed copies in its heaps and the driver's peak climbs with the rounds (2.41 GB
after 20 rounds, 2.66 GB after 62). A daemon thread calling `malloc_trim(0)`
every 2 s kept it at 2.39 GB after 62 rounds, at no measurable cost (7.85
against 7.95 s/round; docs/performance.md, 'Memory over long runs'). The managed
execution contexts (`local_execution_context`, `multi_worker_execution_context`)
run it while they are open; `TFF_FEDWIN_DRIVER_TRIM_SECONDS` sets the interval
(0 disables). A C library without `malloc_trim` (not glibc) means no trimming
and a logged warning: a memory economy, not a protection.
"""

import contextlib
import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable, Iterator
from typing import Optional

from absl import logging

from tff_fedwin.runtime import worker_memory

DRIVER_TRIM_SECONDS_VARIABLE = 'TFF_FEDWIN_DRIVER_TRIM_SECONDS'
DEFAULT_DRIVER_TRIM_SECONDS = '2'
THREAD_NAME = 'fedwin-driver-trim'


def _malloc_trim() -> Optional[Callable[[int], int]]:
  """glibc's `malloc_trim`, or None where the C library has none."""
  try:
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
    return libc.malloc_trim
  except (OSError, AttributeError) as e:
    logging.warning('No periodic malloc_trim in the driver: %s', e)
    return None


def driver_trim_seconds() -> int:
  """The driver's trim interval from the environment (default 2 s).

  Raises:
    ValueError: If `TFF_FEDWIN_DRIVER_TRIM_SECONDS` is malformed.
  """
  return worker_memory.trim_seconds(
      os.environ, DRIVER_TRIM_SECONDS_VARIABLE, DEFAULT_DRIVER_TRIM_SECONDS
  )


@contextlib.contextmanager
def periodic_malloc_trim(seconds: float) -> Iterator[bool]:
  """Calls `malloc_trim(0)` every `seconds` from a daemon thread while open.

  Args:
    seconds: The interval; <= 0 runs no thread.

  Yields:
    Whether the thread runs. It is stopped and joined on exit.
  """
  trim = _malloc_trim() if seconds > 0 else None
  if trim is None:
    yield False
    return
  stop = threading.Event()

  def loop():
    while not stop.wait(seconds):
      trim(0)

  thread = threading.Thread(target=loop, name=THREAD_NAME, daemon=True)
  thread.start()
  try:
    yield True
  finally:
    stop.set()
    thread.join()
