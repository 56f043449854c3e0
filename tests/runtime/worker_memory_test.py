"""Tests for tff_fedwin.runtime.worker_memory: the periodic malloc_trim shim."""

import os
import re
import subprocess
import sys

import pytest

from tests.runtime import processes
from tff_fedwin.runtime import loopback
from tff_fedwin.runtime import worker_memory

# Waits 3 s and prints the RSS given back meanwhile, in MB.
_FRAGMENT_SCRIPT = processes.FRAGMENTED_HEAP_SCRIPT + """
import time
time.sleep(3)
print((before - rss_kb()) / 1024)
"""


@pytest.fixture(scope='module')
def trim_library(tmp_path_factory):
  """The trim shim built into a private cache for this module."""
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv('XDG_CACHE_HOME', str(tmp_path_factory.mktemp('shim_cache')))
    return loopback.preload_library(worker_memory.TRIM_SOURCE)


def _returned_mb(library, seconds):
  env = dict(os.environ, LD_PRELOAD=library)
  env[worker_memory.TRIM_SECONDS_VARIABLE] = seconds
  env.pop('MALLOC_TRIM_THRESHOLD_', None)
  result = subprocess.run(
      [sys.executable, '-c', _FRAGMENT_SCRIPT],
      env=env,
      capture_output=True,
      text=True,
      check=True,
  )
  return float(result.stdout)


def test_trim_thread_returns_freed_heap_memory(trim_library):
  # 50,000 x 4 KB = 195 MB freed. Without a trim glibc keeps it resident (the
  # control run must show that, or the check below would prove nothing); one
  # malloc_trim(0) after ~1 s gives almost all of it back.
  assert _returned_mb(trim_library, '0') < 20
  assert _returned_mb(trim_library, '1') > 150


@pytest.mark.parametrize('text', ['abc', '-1', '1.5', '86401'])
def test_malformed_trim_seconds_is_one_line_error(text):
  with pytest.raises(
      ValueError,
      match=re.escape(f'{worker_memory.TRIM_SECONDS_VARIABLE}={text!r}'),
  ) as error:
    worker_memory.worker_memory_env({worker_memory.TRIM_SECONDS_VARIABLE: text})
  message = str(error.value)
  assert '\n' not in message
  assert '0..86400' in message


def test_zero_seconds_preloads_nothing():
  env = worker_memory.worker_memory_env(
      {worker_memory.TRIM_SECONDS_VARIABLE: '0', 'LD_PRELOAD': '/x.so'}
  )
  assert env['LD_PRELOAD'] == '/x.so'
  assert env['MALLOC_ARENA_MAX'] == '2'


def test_trim_shim_follows_existing_preload(trim_library, monkeypatch):
  monkeypatch.setenv(
      'XDG_CACHE_HOME', os.path.dirname(os.path.dirname(trim_library))
  )
  env = worker_memory.worker_memory_env({'LD_PRELOAD': '/x.so'})
  assert env['LD_PRELOAD'].split(':') == ['/x.so', trim_library]
  assert env[worker_memory.TRIM_SECONDS_VARIABLE] == '10'
