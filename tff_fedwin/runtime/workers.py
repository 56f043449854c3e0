"""Local TFF C++ worker processes that never outlive their owner.

A worker started here dies with the thread that started it, writes to a log
file in a private directory instead of the parent's streams, and by default is
confined to loopback and to its user: it refuses other users' connections, and
the driver reaches it at exactly the address it listens on (docs/runtime.md,
'Why we manage the worker ourselves', 'Loopback confinement'). Start workers
from the main thread.
"""

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from typing import Optional

from absl import logging
import grpc
import portpicker
import tensorflow_federated as tff

from tff_fedwin import errors
from tff_fedwin.runtime import loopback
from tff_fedwin.runtime import worker_logs
from tff_fedwin.runtime import worker_memory
from tff_fedwin.runtime import worker_stub

_PR_SET_PDEATHSIG = 1

# Workers started by this process and not yet stopped; stopped at exit too.
_RUNNING_WORKERS: dict[int, 'LocalWorker'] = {}


def worker_binary_path() -> str:
  """Returns the path of the `worker_binary` shipped in the TFF wheel."""
  path = os.path.join(os.path.dirname(tff.__file__), 'data', 'worker_binary')
  if not os.path.isfile(path):
    raise RuntimeError(
        f'The TFF worker binary was not found at {path}. Reinstall the pinned '
        'environment with `bash scripts/setup_env.sh`.'
    )
  return path


def _pick_loopback_port() -> int:
  """A port free on ::1 and 127.0.0.1, chosen by the kernel.

  Not `portpicker` (docs/runtime.md, 'Loopback confinement').
  """
  for _ in range(100):
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as v6:
      v6.bind(('::1', 0))
      port = v6.getsockname()[1]
      with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as v4:
        try:
          v4.bind(('127.0.0.1', port))
        except OSError:
          continue
      return port
  raise RuntimeError('No free loopback port found.')


# Sets PR_SET_PDEATHSIG (kept across exec), then exits unless the parent is
# still the one that spawned it (it may have died before prctl), then execs
# the worker: the same pid throughout.
_PPID_CHECK = '[ "$PPID" = "$0" ] || exit 1; exec "$@"'


def _pdeathsig_launcher(parent_pid: int) -> list[str]:
  """`setpriv --pdeathsig KILL -- sh -c CHECK PID`, or [] without setpriv."""
  setpriv = shutil.which('setpriv')
  if setpriv is None or not os.path.exists('/bin/sh'):
    return []
  return [
      setpriv,
      '--pdeathsig',
      'KILL',
      '--',
      '/bin/sh',
      '-c',
      _PPID_CHECK,
      str(parent_pid),
  ]


def _make_preexec_fn(parent_pid: int):
  """Returns a `preexec_fn` tying the child's life to the parent's thread."""

  def preexec():
    libc = ctypes.CDLL('libc.so.6', use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
      os._exit(127)  # pylint: disable=protected-access
    # The parent may have died between fork() and prctl(): then no signal
    # will ever come, so exit now.
    if os.getppid() != parent_pid:
      os._exit(1)  # pylint: disable=protected-access

  return preexec


class LocalWorker:
  """A TFF `worker_binary` process started (and owned) by this process.

  Attributes:
    port: The TCP port the worker serves on.
    host: The host part of `address`: for a loopback-only worker, the address
      it listens on (`[::1]`, or `127.0.0.1` without IPv6), set once it
      listens; `localhost` for a worker on all interfaces.
    log_path: The file receiving the worker's stdout and stderr.
    pid: The worker's process id.
  """

  def __init__(
      self,
      process: subprocess.Popen,
      port: int,
      log_path: str,
      host: str = 'localhost',
  ):
    self._process = process
    self.port = port
    self.host = host
    self.log_path = log_path
    self.pid = process.pid

  @property
  def address(self) -> str:
    """`host:port` to reach the worker from this machine."""
    return f'{self.host}:{self.port}'

  @property
  def returncode(self) -> Optional[int]:
    """The exit code once the worker has exited, else `None`."""
    return self._process.poll()

  def is_running(self) -> bool:
    return self._process.poll() is None

  def exits_within(self, seconds: float) -> bool:
    """Whether the worker has exited, or does within `seconds`."""
    try:
      self._process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
      return False
    return True

  def stop(self, timeout_seconds: float = 10.0) -> None:
    """Stops the worker: SIGTERM, then SIGKILL after `timeout_seconds`.

    SIGTERM, not SIGINT: a program started with `&` from a script (no job
    control) runs with SIGINT ignored, and so does every worker it starts
    (an ignored signal stays ignored across exec); SIGINT then did nothing
    and each stop waited `timeout_seconds`. `worker_binary` handles neither
    signal: both end it at once.
    """
    _RUNNING_WORKERS.pop(self.pid, None)
    if self._process.poll() is not None:
      return
    self._process.send_signal(signal.SIGTERM)
    try:
      self._process.wait(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
      self._process.kill()
      self._process.wait()

  def kill(self) -> None:
    """Kills the worker at once (SIGKILL) and reaps it."""
    _RUNNING_WORKERS.pop(self.pid, None)
    if self._process.poll() is None:
      self._process.kill()
      self._process.wait()

  def __repr__(self) -> str:
    state = 'running' if self.is_running() else 'stopped'
    return f'LocalWorker(pid={self.pid}, port={self.port}, {state})'


WorkerCrashedError = errors.WorkerCrashedError


# Attempts to start a worker that a signal kills before it serves (a start-up
# crash in gRPC's epoll poller was seen once; docs/runtime.md, 'Why we manage
# the worker ourselves').
STARTUP_ATTEMPTS = 2


def _spawn(
    *,
    port: int,
    max_concurrent_computation_calls: int,
    log_path: str,
    log_fd: int,
    env: dict[str, str],
) -> LocalWorker:
  """Starts `worker_binary` on `port`, tied to this thread, logs to `log_fd`."""
  args = [
      worker_binary_path(),
      f'--port={port}',
      f'--max_concurrent_computation_calls={max_concurrent_computation_calls}',
  ]
  launcher = _pdeathsig_launcher(os.getpid())
  if launcher:
    # No preexec_fn: CPython then spawns without running Python code in a
    # forked copy of this multithreaded (TF, gRPC) process.
    process = subprocess.Popen(
        launcher + args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        close_fds=True,
    )
  else:
    process = subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
        args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        close_fds=True,
        preexec_fn=_make_preexec_fn(os.getpid()),
    )
  worker = LocalWorker(process, port, log_path)
  _RUNNING_WORKERS[worker.pid] = worker
  return worker


def _wait_until_confined_and_serving(
    worker: LocalWorker, *, timeout_seconds: float, loopback_only: bool
) -> None:
  """Waits for the worker; on any failure no worker is left running."""
  try:
    _wait_until_serving(worker, timeout_seconds, find_listener=loopback_only)
    if loopback_only:
      loopback.check_loopback_only(worker.pid)
      loopback.check_shim_loaded(worker.pid, loopback.loopback_bind_library())
  except loopback.WorkerConfinementError as e:
    worker.kill()
    raise loopback.WorkerConfinementError(
        f'{e} The worker was killed.'
    ) from None
  except BaseException:
    worker.stop()
    raise


def start_local_worker(
    *,
    port: Optional[int] = None,
    log_dir: Optional[str] = None,
    max_concurrent_computation_calls: Optional[int] = None,
    ready_timeout_seconds: float = 60.0,
    loopback_only: bool = True,
) -> LocalWorker:
  """Starts a TFF worker that dies with this process, and waits until it serves.

  Args:
    port: The port to serve on; a free one is picked when `None`.
    log_dir: Directory for the worker's log file (mode 0600), created 0700
      if needed; default `$TMPDIR/tff_fedwin_workers-<euid>`. What is
      refused: docs/runtime.md, 'Loopback confinement'.
    max_concurrent_computation_calls: Passed to the worker; non-positive means
      no limit (TFF's default). `None`: the number of CPUs this process may
      run on, so that concurrent client computations do not oversubscribe
      the cores (docs/performance.md, 'The client loop and the worker').
    ready_timeout_seconds: How long to wait for the worker's gRPC service.
    loopback_only: Serve on loopback and to this user only, through the
      `tff_fedwin.runtime.loopback` shim, checked once it serves
      (docs/runtime.md, 'Loopback confinement'); `address` is then exactly
      where it listens (`[::1]:port`). `False` keeps TFF's behaviour: all
      interfaces, any user, no authentication (a warning is logged).

  Returns:
    A running `LocalWorker`. The caller must `stop()` it (or use
    `local_execution_context`); it is also killed when this process dies.

  Raises:
    WorkerConfinementError: If the log directory or file is refused; with
      `loopback_only`, if the worker cannot be confined to loopback and its
      user or proven to be; no worker is left running.
    WorkerCrashedError: If the worker is killed by a signal before serving
      `STARTUP_ATTEMPTS` times in a row (a first crash is retried once).
    RuntimeError: If the worker exits or does not serve within the timeout;
      the message names the port and quotes the worker's log.
  """
  env = worker_memory.worker_memory_env(os.environ)
  if loopback_only:
    env['LD_PRELOAD'] = loopback.ld_preload(env.get('LD_PRELOAD'))
  if port is None:
    port = (
        _pick_loopback_port()
        if loopback_only
        else (portpicker.pick_unused_port())
    )
  tighten = not log_dir
  log_dir = log_dir or worker_logs.default_log_dir()
  log_name = f'worker-{os.getpid()}-{port}.log'
  if max_concurrent_computation_calls is None:
    max_concurrent_computation_calls = len(os.sched_getaffinity(0))
  for attempt in range(1, STARTUP_ATTEMPTS + 1):
    log_fd = worker_logs.open_log(log_dir, log_name, tighten=tighten)
    try:
      worker = _spawn(
          port=port,
          max_concurrent_computation_calls=max_concurrent_computation_calls,
          log_path=os.path.join(log_dir, log_name),
          log_fd=log_fd,
          env=env,
      )
    finally:
      os.close(log_fd)
    try:
      _wait_until_confined_and_serving(
          worker,
          timeout_seconds=ready_timeout_seconds,
          loopback_only=loopback_only,
      )
      break
    except WorkerCrashedError as e:
      if attempt == STARTUP_ATTEMPTS:
        raise
      logging.warning(
          '%s Starting it again (attempt %d of %d).',
          e,
          attempt + 1,
          STARTUP_ATTEMPTS,
      )
  if not loopback_only:
    logging.warning(
        'TFF worker pid %d listens on port %d on all network interfaces, '
        'without authentication (loopback_only=False).',
        worker.pid,
        port,
    )
  return worker


def running_workers() -> tuple[LocalWorker, ...]:
  """The workers this process started that have not been stopped."""
  return tuple(_RUNNING_WORKERS.values())


@atexit.register
def _stop_all_workers() -> None:
  for worker in running_workers():
    worker.stop()


def _check_alive_and_in_time(
    worker: LocalWorker, deadline: float, timeout_seconds: float
) -> None:
  if not worker.is_running():
    error = WorkerCrashedError if worker.returncode < 0 else RuntimeError
    raise error(
        f'The TFF worker on port {worker.port} exited with code '
        f'{worker.returncode} before serving. '
        f'Last lines of {worker.log_path}:\n{worker_logs.tail(worker.log_path)}'
    )
  if time.monotonic() > deadline:
    raise RuntimeError(
        f'The TFF worker on port {worker.port} did not serve within '
        f'{timeout_seconds} s. Last lines of {worker.log_path}:\n'
        f'{worker_logs.tail(worker.log_path)}'
    )


# How long `_find_listener` waits for a worker whose /proc entries vanished
# to exit.
_EXIT_GRACE_SECONDS = 1.0


def _find_listener(worker: LocalWorker) -> bool:
  """Sets `worker.host` to where it listens on its port; False if nowhere yet.

  `::1` is preferred; every listener must be loopback.

  Raises:
    WorkerConfinementError: If a listener is not loopback, or /proc cannot
      tell while the worker runs.
  """
  try:
    addresses = sorted(
        a for a, p in loopback.listening_sockets(worker.pid) if p == worker.port
    )
  except loopback.WorkerConfinementError:
    # A worker that is exiting (e.g. its port was taken) loses its /proc
    # entries before it can be reaped: give it a second to be, so that its
    # own error is reported rather than /proc's silence.
    if worker.exits_within(_EXIT_GRACE_SECONDS):
      return False  # Reported by _check_alive_and_in_time.
    raise
  if not addresses:
    return False
  loopback.check_loopback_only(worker.pid)
  address = '::1' if '::1' in addresses else addresses[0]
  worker.host = loopback.connect_host(address)
  return True


def _wait_until_serving(
    worker: LocalWorker, timeout_seconds: float, *, find_listener: bool
) -> None:
  """Waits until the worker answers gRPC at `worker.address`.

  With `find_listener`, first waits until it listens, and connects to exactly
  that address (`_find_listener`), never to a name such as `localhost`.
  """
  deadline = time.monotonic() + timeout_seconds
  while find_listener and not _find_listener(worker):
    _check_alive_and_in_time(worker, deadline, timeout_seconds)
    time.sleep(0.05)
  with grpc.insecure_channel(
      worker.address, worker_stub.GRPC_CHANNEL_OPTIONS
  ) as channel:
    ready = grpc.channel_ready_future(channel)
    while True:
      try:
        ready.result(timeout=0.2)
        return
      except grpc.FutureTimeoutError:
        pass
      _check_alive_and_in_time(worker, deadline, timeout_seconds)
