"""Tests for tff_fedwin.runtime.driver_memory: the driver's periodic trim."""

import re
import subprocess
import sys
import threading

import pytest

from tests.runtime import processes
from tff_fedwin import runtime
from tff_fedwin.runtime import driver_memory

# Imports the module (TensorFlow with it) before the heap is fragmented, then
# waits 3 s inside `periodic_malloc_trim(argv[1])` and prints whether its
# thread ran and the RSS given back meanwhile, in MB.
_FRAGMENT_SCRIPT = (
    """
import sys, time
from tff_fedwin.runtime import driver_memory
"""
    + processes.FRAGMENTED_HEAP_SCRIPT
    + """
with driver_memory.periodic_malloc_trim(float(sys.argv[1])) as running:
  time.sleep(3)
  print(running, (before - rss_kb()) / 1024)
"""
)


def _returned(seconds):
  result = subprocess.run(
      [sys.executable, '-c', _FRAGMENT_SCRIPT, seconds],
      capture_output=True,
      text=True,
      check=True,
  )
  running, mb = result.stdout.split()
  return running == 'True', float(mb)


def _trim_threads():
  return [
      t for t in threading.enumerate() if t.name == driver_memory.THREAD_NAME
  ]


def test_periodic_trim_returns_freed_heap_memory():
  # The control keeps the 195 MB resident; a trim every second returns it.
  running, mb = _returned('0')
  assert not running and mb < 20
  running, mb = _returned('1')
  assert running and mb > 150


# The suite's own worker context (tests/conftest.py) may run one already.
def test_thread_runs_only_while_open():
  before = _trim_threads()
  with driver_memory.periodic_malloc_trim(60) as running:
    assert running and len(_trim_threads()) == len(before) + 1
  assert _trim_threads() == before


def test_local_context_trims_while_open(monkeypatch):
  monkeypatch.delenv(driver_memory.DRIVER_TRIM_SECONDS_VARIABLE, raising=False)
  before = _trim_threads()
  with runtime.local_execution_context():
    assert len(_trim_threads()) == len(before) + 1
  assert _trim_threads() == before


@pytest.mark.parametrize('text', ['x', '-2'])
def test_malformed_interval_is_one_line_error_before_a_worker_starts(
    monkeypatch, text
):
  monkeypatch.setenv(driver_memory.DRIVER_TRIM_SECONDS_VARIABLE, text)
  before = runtime.running_workers()
  with pytest.raises(
      ValueError,
      match='^'
      + re.escape(f'{driver_memory.DRIVER_TRIM_SECONDS_VARIABLE}={text!r}: ')
      + 'must be',
  ) as error:
    with runtime.local_execution_context():
      pass
  assert '\n' not in str(error.value)
  assert runtime.running_workers() == before
