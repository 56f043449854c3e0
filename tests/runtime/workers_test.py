"""Tests for tff_fedwin.runtime.workers: workers never outlive their owner."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow_federated as tff

from tests.runtime import processes
from tff_fedwin import runtime
from tff_fedwin.runtime import worker_memory
from tff_fedwin.runtime import workers


@tff.tensorflow.computation(np.float32)
def _add_one(x):
  return x + 1.0


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


def test_worker_output_goes_to_log_file_not_parent_streams(tmp_path):
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    for fd in (1, 2):
      target = os.readlink(f'/proc/{worker.pid}/fd/{fd}')
      assert target == worker.log_path
    assert os.readlink(f'/proc/{worker.pid}/fd/0') == '/dev/null'
  finally:
    worker.stop()
  assert not processes.pid_alive(worker.pid)


def test_start_fails_with_port_and_log_when_port_is_taken(tmp_path):
  import socket  # pylint: disable=g-import-not-at-top

  with socket.socket(socket.AF_INET6) as sock:
    sock.bind(('::', 0))
    sock.listen()
    port = sock.getsockname()[1]
    with pytest.raises(
        RuntimeError, match=f'(?s)port {port}.*Address already in use'
    ):
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
    assert processes.pid_alive(worker_pid)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert processes.wait_until_dead(
        worker_pid
    ), f'worker {worker_pid} outlived parent'
  finally:
    child.kill()
    child.wait()


def test_piped_script_returns_and_leaves_no_worker():
  # Under TFF's default context the leaked worker holds the pipe open and
  # `| cat` never returns; `timeout` turns such a hang into exit code 124.
  result = subprocess.run(
      [
          'timeout',
          '120',
          'bash',
          '-c',
          f'"{sys.executable}" -c "$0" run 2>/dev/null | cat',
          _CHILD_SCRIPT,
      ],
      capture_output=True,
      text=True,
      check=False,
  )
  assert result.returncode == 0, result
  worker_pid = int(result.stdout.split('WORKER_PID')[1].split()[0])
  assert processes.wait_until_dead(worker_pid, timeout_seconds=5)


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
    tmp_path, caplog, loopback_only
):
  worker = runtime.start_local_worker(
      log_dir=str(tmp_path), loopback_only=loopback_only
  )
  try:
    addresses = _listening_addresses(worker.port)
    assert addresses, 'worker port not in LISTEN state'
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelname == 'WARNING' and f'pid {worker.pid}' in r.getMessage()
    ]
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


@pytest.mark.parametrize(
    'requested, expected',
    [
        (None, len(os.sched_getaffinity(0))),  # One call per usable CPU.
        (-1, -1),  # TFF's default: no limit.
        (3, 3),
    ],
)
def test_worker_concurrency_limit_reaches_the_worker(
    tmp_path, requested, expected
):
  worker = runtime.start_local_worker(
      log_dir=str(tmp_path), max_concurrent_computation_calls=requested
  )
  try:
    with open(f'/proc/{worker.pid}/cmdline', 'rb') as f:
      args = f.read().decode().split('\0')
  finally:
    worker.stop()
  assert f'--max_concurrent_computation_calls={expected}' in args


def _spawn_crashing_first(monkeypatch, crashes):
  """Patches `_spawn` so that its first `crashes` workers die by SIGSEGV."""
  real_spawn = workers._spawn  # pylint: disable=protected-access
  spawned = []

  def spawn(**kwargs):
    worker = real_spawn(**kwargs)
    spawned.append(worker)
    if len(spawned) <= crashes:
      os.kill(worker.pid, signal.SIGSEGV)
      worker._process.wait()  # pylint: disable=protected-access
    return worker

  monkeypatch.setattr(workers, '_spawn', spawn)
  return spawned


def test_a_worker_crashing_before_serving_is_started_again(
    tmp_path, monkeypatch
):
  spawned = _spawn_crashing_first(monkeypatch, crashes=1)
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    assert len(spawned) == 2
    assert spawned[0].returncode == -signal.SIGSEGV
    assert worker is spawned[1] and worker.is_running()
    assert runtime.running_workers().count(spawned[0]) == 0
  finally:
    worker.stop()


def test_a_worker_crashing_twice_is_an_error(tmp_path, monkeypatch):
  spawned = _spawn_crashing_first(monkeypatch, crashes=workers.STARTUP_ATTEMPTS)
  with pytest.raises(runtime.WorkerCrashedError, match='exited with code -11'):
    runtime.start_local_worker(log_dir=str(tmp_path))
  assert len(spawned) == workers.STARTUP_ATTEMPTS
  assert not any(w.is_running() for w in spawned)
  assert not set(spawned) & set(runtime.running_workers())


@pytest.mark.skipif(
    not workers._pdeathsig_launcher(os.getpid()),  # pylint: disable=protected-access
    reason='no setpriv',
)
def test_launcher_execs_only_while_its_spawner_is_the_parent():
  # The launcher's shell compares its parent pid with the one it was given:
  # this process spawns it, so `true` runs (exit 0); given pid 1 it exits 1
  # without exec'ing `false` (which would also exit 1, so use `true` there).
  launcher = workers._pdeathsig_launcher  # pylint: disable=protected-access
  assert subprocess.run(launcher(os.getpid()) + ['/bin/true']).returncode == 0
  assert subprocess.run(launcher(1) + ['/bin/true']).returncode == 1


def test_without_setpriv_workers_start_with_preexec_fn(tmp_path, monkeypatch):
  monkeypatch.setattr(workers.shutil, 'which', lambda name: None)
  assert not workers._pdeathsig_launcher(os.getpid())  # pylint: disable=protected-access
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    assert worker.is_running()
    with open(f'/proc/{worker.pid}/stat') as f:
      parent_pid = int(f.read().rsplit(')', 1)[1].split()[1])
    assert parent_pid == os.getpid()
  finally:
    worker.stop()


def _environ_of(pid: int) -> dict[str, str]:
  with open(f'/proc/{pid}/environ', 'rb') as f:
    entries = f.read().split(b'\0')
  return dict(e.decode().split('=', 1) for e in entries if b'=' in e)


def _thread_names(pid: int) -> list[str]:
  names = []
  for task in os.listdir(f'/proc/{pid}/task'):
    with open(f'/proc/{pid}/task/{task}/comm') as f:
      names.append(f.read().strip())
  return names


# (MALLOC_ARENA_MAX, trim seconds) set by the user; None: left to the library.
@pytest.mark.parametrize(
    'user_arenas, user_trim', [(None, None), ('8', '0'), (None, '30')]
)
def test_worker_gets_malloc_settings_and_user_values_win(
    tmp_path, monkeypatch, user_arenas, user_trim
):
  for name, value in [
      ('MALLOC_ARENA_MAX', user_arenas),
      (worker_memory.TRIM_SECONDS_VARIABLE, user_trim),
  ]:
    if value is None:
      monkeypatch.delenv(name, raising=False)
    else:
      monkeypatch.setenv(name, value)
  # A setting the library does not make passes through unchanged.
  monkeypatch.setenv('MALLOC_TRIM_THRESHOLD_', '65536')
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    environ = _environ_of(worker.pid)
    threads = _thread_names(worker.pid)
  finally:
    worker.stop()
  assert environ['MALLOC_ARENA_MAX'] == (user_arenas or '2')
  assert environ['MALLOC_TRIM_THRESHOLD_'] == '65536'
  trims = user_trim != '0'
  assert environ[worker_memory.TRIM_SECONDS_VARIABLE] == (user_trim or '10')
  assert ('malloc_trim-' in environ['LD_PRELOAD']) == trims
  assert threads.count(worker_memory.TRIM_THREAD_NAME) == int(trims)


def test_malformed_trim_seconds_fails_before_a_worker_starts(
    tmp_path, monkeypatch
):
  monkeypatch.setenv(worker_memory.TRIM_SECONDS_VARIABLE, 'often')
  before = runtime.running_workers()
  with pytest.raises(ValueError, match='TFF_FEDWIN_MALLOC_TRIM_SECONDS'):
    runtime.start_local_worker(log_dir=str(tmp_path))
  assert runtime.running_workers() == before


def _ignored_signals(pid):
  with open(f'/proc/{pid}/status') as f:
    return int(next(l for l in f if l.startswith('SigIgn:')).split()[1], 16)


def test_stop_ends_a_worker_that_inherited_an_ignored_sigint(tmp_path):
  # A program started with `cmd &` from a script (no job control) runs with
  # SIGINT ignored; the workers it starts inherit that. stop() must still end
  # the worker with its first signal, not with the SIGKILL after its timeout.
  previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    worker = runtime.start_local_worker(log_dir=str(tmp_path))
  finally:
    signal.signal(signal.SIGINT, previous)
  try:
    # The condition took effect: the worker ignores SIGINT.
    assert _ignored_signals(worker.pid) & (1 << (signal.SIGINT - 1))
    worker.stop(timeout_seconds=5)
  finally:
    worker.kill()
  assert worker.returncode == -signal.SIGTERM
