"""Tests for tff_fedwin.runtime.workers: workers never outlive their owner."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_fedwin import runtime
from tff_fedwin.runtime import workers


@tff.tensorflow.computation(np.float32)
def _add_one(x):
  return x + 1.0


def _pid_alive(pid: int) -> bool:
  """True if `pid` exists and is not a zombie."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(')')[-1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


def _wait_until_dead(pid: int, timeout_seconds: float = 20.0) -> bool:
  deadline = time.monotonic() + timeout_seconds
  while time.monotonic() < deadline:
    if not _pid_alive(pid):
      return True
    time.sleep(0.1)
  return False


# A script that runs one computation on a managed worker, prints the worker's
# pid, then (optionally) blocks until it is killed.
_CHILD_SCRIPT = """
import sys, time
import numpy as np
import tensorflow_federated as tff
from tff_fedwin import runtime

@tff.tensorflow.computation(np.float32)
def add_one(x):
  return x + 1.0

with runtime.local_execution_context():
  assert add_one(1.0) == 2.0
  (worker,) = runtime.running_workers()
  print('WORKER_PID', worker.pid, flush=True)
  if sys.argv[1] == 'block':
    time.sleep(600)
"""


def test_context_runs_computations_and_stops_its_worker(tmp_path):
  with runtime.local_execution_context(log_dir=str(tmp_path)):
    assert _add_one(1.0) == 2.0
    (worker,) = [
        w for w in runtime.running_workers() if w.log_path.startswith(
            str(tmp_path))
    ]
    assert _pid_alive(worker.pid)
  assert not worker.is_running()
  assert worker not in runtime.running_workers()


def test_worker_output_goes_to_log_file_not_parent_streams(tmp_path):
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    for fd in (1, 2):
      target = os.readlink(f'/proc/{worker.pid}/fd/{fd}')
      assert target == worker.log_path
    assert os.readlink(f'/proc/{worker.pid}/fd/0') == '/dev/null'
  finally:
    worker.stop()
  assert not _pid_alive(worker.pid)


def test_worker_stopped_when_block_raises(tmp_path):
  with pytest.raises(ZeroDivisionError):
    with runtime.local_execution_context(log_dir=str(tmp_path)):
      (worker,) = [
          w for w in runtime.running_workers()
          if w.log_path.startswith(str(tmp_path))
      ]
      _ = 1 / 0
  assert _wait_until_dead(worker.pid, timeout_seconds=5)


def test_start_fails_with_port_and_log_when_port_is_taken(tmp_path):
  import socket  # pylint: disable=g-import-not-at-top

  with socket.socket(socket.AF_INET6) as sock:
    sock.bind(('::', 0))
    sock.listen()
    port = sock.getsockname()[1]
    with pytest.raises(RuntimeError, match=f'(?s)port {port}.*Address already in use'):
      runtime.start_local_worker(
          port=port, log_dir=str(tmp_path), ready_timeout_seconds=30
      )


def test_worker_dies_when_parent_is_sigkilled():
  child = subprocess.Popen(
      [sys.executable, '-c', _CHILD_SCRIPT, 'block'],
      stdout=subprocess.PIPE,
      stderr=subprocess.DEVNULL,
      text=True,
  )
  try:
    worker_pid = None
    for line in child.stdout:
      if line.startswith('WORKER_PID'):
        worker_pid = int(line.split()[1])
        break
    assert worker_pid is not None, 'child never reported its worker'
    assert _pid_alive(worker_pid)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert _wait_until_dead(worker_pid), f'worker {worker_pid} outlived parent'
  finally:
    child.kill()
    child.wait()


def test_piped_script_returns_and_leaves_no_worker():
  # Under TFF's default context the leaked worker holds the pipe open and
  # `| cat` never returns; `timeout` turns such a hang into exit code 124.
  result = subprocess.run(
      [
          'timeout', '120', 'bash', '-c',
          f'"{sys.executable}" -c "$0" run 2>/dev/null | cat', _CHILD_SCRIPT,
      ],
      capture_output=True,
      text=True,
      check=False,
  )
  assert result.returncode == 0, result
  worker_pid = int(result.stdout.split('WORKER_PID')[1].split()[0])
  assert _wait_until_dead(worker_pid, timeout_seconds=5)


def _listening_addresses(port: int) -> set[str]:
  """Local addresses of sockets in LISTEN state on `port`, from /proc/net."""
  found = set()
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    with open(table) as f:
      next(f)
      for line in f:
        local, state = line.split()[1], line.split()[3]
        address, port_hex = local.split(':')
        if state == '0A' and int(port_hex, 16) == port:  # 0A = TCP_LISTEN.
          found.add(address)
  return found


# /proc/net hex addresses (little-endian words): 0.0.0.0 and :: are all zeros;
# 127.0.0.1 is 0100007F; ::1 is 00000000000000000000000001000000.
_WILDCARDS = {'00000000', '0' * 32}
_LOOPBACKS = {'0100007F', '00000000000000000000000001000000'}


@pytest.mark.parametrize('loopback_only', [True, False])
def test_worker_listens_on_loopback_only_by_default(
    tmp_path, caplog, loopback_only):
  worker = runtime.start_local_worker(
      log_dir=str(tmp_path), loopback_only=loopback_only)
  try:
    addresses = _listening_addresses(worker.port)
    assert addresses, 'worker port not in LISTEN state'
    warnings = [r.getMessage() for r in caplog.records
                if r.levelname == 'WARNING' and f'pid {worker.pid}' in
                r.getMessage()]
    if loopback_only:
      assert addresses <= _LOOPBACKS, addresses
      assert not warnings
    else:
      assert addresses & _WILDCARDS, addresses
      assert len(warnings) == 1, warnings
      assert 'all network interfaces, without authentication' in warnings[0]
    # Reachable from this machine either way.
    with runtime.local_execution_context(log_dir=str(tmp_path)):
      assert _add_one(3.0) == 4.0
  finally:
    worker.stop()


def test_dead_worker_raises_naming_it_instead_of_hanging(tmp_path):
  # TFF retries UNAVAILABLE forever; the managed context gives up after
  # reconnect_timeout_seconds with an error that names the worker.
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  context = runtime.create_remote_execution_context(
      worker.address, reconnect_timeout_seconds=2)
  with tff.framework.get_context_stack().install(context):
    assert _add_one(1.0) == 2.0
    worker.stop()
    start = time.monotonic()
    with pytest.raises(runtime.WorkerUnavailableError,
                       match=f'localhost:{worker.port}.*unreachable'):
      _add_one(2.0)
  assert time.monotonic() - start < 60


class _Started(Exception):
  pass


@pytest.mark.parametrize('loopback_only', [True, False])
def test_contexts_pass_loopback_only_to_their_workers(
    monkeypatch, loopback_only):
  calls = []

  def fake_start_local_worker(**kwargs):
    calls.append(kwargs['loopback_only'])
    raise _Started()

  monkeypatch.setattr(workers, 'start_local_worker', fake_start_local_worker)
  with pytest.raises(_Started):
    with runtime.local_execution_context(loopback_only=loopback_only):
      pass
  with pytest.raises(_Started):
    with runtime.multi_worker_execution_context(
        num_workers=1, loopback_only=loopback_only):
      pass
  assert calls == [loopback_only, loopback_only]


@pytest.mark.parametrize('requested, expected', [
    (None, len(os.sched_getaffinity(0))),  # One call per usable CPU.
    (-1, -1),                               # TFF's default: no limit.
    (3, 3),
])
def test_worker_concurrency_limit_reaches_the_worker(tmp_path, requested,
                                                     expected):
  worker = runtime.start_local_worker(
      log_dir=str(tmp_path), max_concurrent_computation_calls=requested)
  try:
    with open(f'/proc/{worker.pid}/cmdline', 'rb') as f:
      args = f.read().decode().split('\0')
  finally:
    worker.stop()
  assert f'--max_concurrent_computation_calls={expected}' in args
