"""Lifecycle of TFF C++ workers, and execution contexts over them.

A worker started here dies with the thread that started it (parent-death
signal, also on SIGKILL), reads /dev/null and writes to a log file instead of
the parent's streams, and by default is confined to the loopback interface
(`tff_fedwin.runtime.loopback`): it fails to start rather than listen on other
interfaces. `local_execution_context()` installs a TFF context on such a worker
and stops it on exit, on an exception and on Ctrl-C. Start workers from the main
thread: Linux delivers the parent-death signal when the forking *thread* exits.
"""

import atexit
import collections
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Optional

from absl import logging
import grpc
import portpicker
import tensorflow_federated as tff

from tff_fedwin.runtime import loopback

_PR_SET_PDEATHSIG = 1
GRPC_MAX_MESSAGE_BYTES = 2 * 1000 * 1000 * 1000
GRPC_CHANNEL_OPTIONS = (
    ('grpc.max_message_length', GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_receive_message_length', GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_send_message_length', GRPC_MAX_MESSAGE_BYTES),
)
_LOG_TAIL_LINES = 20

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

  Not `portpicker`: it probes the wildcard address, and a port held only on
  ::1 by another loopback worker looks free there; gRPC sets SO_REUSEPORT, so
  a second worker would then share the port with the first.
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


def _default_log_dir() -> str:
  return os.path.join(tempfile.gettempdir(), 'tff_fedwin_workers')


def _tail(path: str, lines: int = _LOG_TAIL_LINES) -> str:
  try:
    with open(path, errors='replace') as f:
      return ''.join(collections.deque(f, maxlen=lines))
  except OSError:
    return '<no log>'


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
    log_path: The file receiving the worker's stdout and stderr.
    pid: The worker's process id.
  """

  def __init__(self, process: subprocess.Popen, port: int, log_path: str):
    self._process = process
    self.port = port
    self.log_path = log_path
    self.pid = process.pid

  @property
  def address(self) -> str:
    """`host:port` to reach the worker from this machine."""
    return f'localhost:{self.port}'

  def is_running(self) -> bool:
    return self._process.poll() is None

  def stop(self, timeout_seconds: float = 10.0) -> None:
    """Stops the worker: SIGINT, then SIGKILL after `timeout_seconds`."""
    _RUNNING_WORKERS.pop(self.pid, None)
    if self._process.poll() is not None:
      return
    self._process.send_signal(signal.SIGINT)
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


def _spawn(args: list[str], env: dict[str, str],
           log_path: str) -> subprocess.Popen:
  with open(log_path, 'ab') as log_file:
    return subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
        args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        close_fds=True,
        preexec_fn=_make_preexec_fn(os.getpid()),
    )


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
    log_dir: Directory for the worker's log file (created if needed); defaults
      to `$TMPDIR/tff_fedwin_workers`.
    max_concurrent_computation_calls: Passed to the worker; non-positive means
      no limit (TFF's default). `None`: the number of CPUs this process may
      run on, so that concurrent client computations do not oversubscribe
      the cores (README, Performance: about 25% faster rounds on 2 cores).
    ready_timeout_seconds: How long to wait for the worker's gRPC service.
    loopback_only: Serve on the loopback interface only (default): the worker
      runs with the `tff_fedwin.runtime.loopback` shim preloaded, and once it
      serves, its listening sockets are checked; a worker found listening
      elsewhere is killed. `False` keeps TFF's behaviour: all interfaces,
      without authentication (a warning is logged).

  Returns:
    A running `LocalWorker`. The caller must `stop()` it (or use
    `local_execution_context`); it is also killed when this process dies.

  Raises:
    WorkerConfinementError: With `loopback_only`, if the worker cannot be
      confined to loopback or proven to be; no worker is left running.
    RuntimeError: If the worker exits or does not serve within the timeout;
      the message names the port and quotes the worker's log.
  """
  env = dict(os.environ)
  if loopback_only:
    env['LD_PRELOAD'] = loopback.ld_preload(env.get('LD_PRELOAD'))
  if port is None:
    port = _pick_loopback_port() if loopback_only else (
        portpicker.pick_unused_port())
  log_dir = log_dir or _default_log_dir()
  os.makedirs(log_dir, exist_ok=True)
  log_path = os.path.join(log_dir, f'worker-{os.getpid()}-{port}.log')
  if max_concurrent_computation_calls is None:
    max_concurrent_computation_calls = len(os.sched_getaffinity(0))
  args = [
      worker_binary_path(),
      f'--port={port}',
      f'--max_concurrent_computation_calls={max_concurrent_computation_calls}',
  ]
  worker = LocalWorker(_spawn(args, env, log_path), port, log_path)
  _RUNNING_WORKERS[worker.pid] = worker
  try:
    _wait_until_serving(worker, ready_timeout_seconds)
    if loopback_only:
      loopback.check_loopback_only(worker.pid)
  except loopback.WorkerConfinementError as e:
    worker.kill()
    raise loopback.WorkerConfinementError(
        f'{e} The worker was killed.') from None
  except BaseException:
    worker.stop()
    raise
  if not loopback_only:
    logging.warning(
        'TFF worker pid %d listens on port %d on all network interfaces, '
        'without authentication (loopback_only=False).', worker.pid, port)
  return worker


def running_workers() -> tuple[LocalWorker, ...]:
  """The workers this process started that have not been stopped."""
  return tuple(_RUNNING_WORKERS.values())


@atexit.register
def _stop_all_workers() -> None:
  for worker in running_workers():
    worker.stop()


def _wait_until_serving(worker: LocalWorker, timeout_seconds: float) -> None:
  deadline = time.monotonic() + timeout_seconds
  with grpc.insecure_channel(worker.address, GRPC_CHANNEL_OPTIONS) as channel:
    ready = grpc.channel_ready_future(channel)
    while True:
      try:
        ready.result(timeout=0.2)
        return
      except grpc.FutureTimeoutError:
        pass
      if not worker.is_running():
        raise RuntimeError(
            f'The TFF worker on port {worker.port} exited with code '
            f'{worker._process.returncode} before serving. '  # pylint: disable=protected-access
            f'Last lines of {worker.log_path}:\n{_tail(worker.log_path)}'
        )
      if time.monotonic() > deadline:
        raise RuntimeError(
            f'The TFF worker on port {worker.port} did not serve within '
            f'{timeout_seconds} s. Last lines of {worker.log_path}:\n'
            f'{_tail(worker.log_path)}'
        )


class WorkerUnavailableError(RuntimeError):
  """A TFF worker cannot be reached.

  Attributes:
    address: The worker's `host:port`.
  """

  def __init__(self, address: str, message: str):
    super().__init__(message)
    self.address = address


class WorkerStub(tff.framework.RemoteExecutorStub):
  """`tff.framework.RemoteExecutorGrpcStub` that gives up on a dead worker.

  On UNAVAILABLE (which TFF retries forever) it waits up to
  `reconnect_timeout_seconds` for the channel to become ready; if it does not,
  it raises `WorkerUnavailableError`, which TFF does not retry. Failures to
  dispose of values or executors are ignored, as TFF does itself.
  """

  def __init__(
      self,
      address: str,
      channel: grpc.Channel,
      reconnect_timeout_seconds: float,
  ):
    self._address = address
    self._channel = channel
    self._reconnect_timeout_seconds = reconnect_timeout_seconds
    self._stub = tff.framework.RemoteExecutorGrpcStub(channel)
    self._closed = False

  def close(self) -> None:
    """Marks the channel as closed: disposal calls become no-ops."""
    self._closed = True

  def _call(self, method: str, request):
    try:
      return getattr(self._stub, method)(request)
    except tff.framework.RetryableError as e:
      if self._closed:
        raise
      if wait_until_ready(self._channel, self._reconnect_timeout_seconds):
        raise  # Transient: let TFF retry.
      raise WorkerUnavailableError(
          self._address,
          f'TFF worker {self._address} is unreachable: {method} failed '
          f'({describe_rpc_error(e)}) and the worker did not answer again '
          f'within {self._reconnect_timeout_seconds} s. Has it died?',
      ) from e

  def _dispose_call(self, method: str, request):
    if self._closed:
      return None
    try:
      return getattr(self._stub, method)(request)
    except (grpc.RpcError, tff.framework.RetryableError, ValueError):
      return None  # The worker or the channel is gone, and its values too.

  def get_executor(self, request):
    return self._call('get_executor', request)

  def create_value(self, request):
    return self._call('create_value', request)

  def create_struct(self, request):
    return self._call('create_struct', request)

  def create_call(self, request):
    return self._call('create_call', request)

  def create_selection(self, request):
    return self._call('create_selection', request)

  def compute(self, request):
    return self._call('compute', request)

  def dispose(self, request):
    return self._dispose_call('dispose', request)

  def dispose_executor(self, request):
    return self._dispose_call('dispose_executor', request)

  @property
  def is_ready(self) -> bool:
    return self._stub.is_ready


def describe_rpc_error(error: Exception) -> str:
  for candidate in (error, error.__cause__):
    if isinstance(candidate, grpc.Call):
      try:
        return f'{candidate.code().name}: {candidate.details()}'
      except Exception:  # pylint: disable=broad-except
        pass
  return repr(error)


def wait_until_ready(channel: grpc.Channel, timeout_seconds: float) -> bool:
  future = grpc.channel_ready_future(channel)
  try:
    future.result(timeout=timeout_seconds)
    return True
  except grpc.FutureTimeoutError:
    return False
  finally:
    future.cancel()


def create_remote_execution_context(
    address: str,
    *,
    default_num_clients: int = 0,
    reconnect_timeout_seconds: float = 10.0,
) -> tff.framework.SyncExecutionContext:
  """Returns a synchronous TFF execution context backed by one remote worker.

  Built from public `tff.framework` parts as TFF's own local C++ context, minus
  the process management, and with a stub that turns a dead worker into
  `WorkerUnavailableError` instead of TFF's endless retries.

  Args:
    address: `host:port` of a running TFF worker.
    default_num_clients: Number of clients when a computation's arguments do
      not determine it.
    reconnect_timeout_seconds: On UNAVAILABLE (which TFF would retry forever)
      wait this long for the worker, then raise `WorkerUnavailableError`.
  """
  channel = grpc.insecure_channel(address, GRPC_CHANNEL_OPTIONS)
  stub = WorkerStub(address, channel, reconnect_timeout_seconds)

  def executor_stack_fn(cardinalities):
    if cardinalities.get(tff.CLIENTS) is None:
      cardinalities[tff.CLIENTS] = default_num_clients
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    return executor

  return tff.framework.SyncExecutionContext(
      executor_fn=tff.framework.ResourceManagingExecutorFactory(
          executor_stack_fn=executor_stack_fn
      ),
      compiler_fn=tff.backends.native.desugar_and_transform_to_native,
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result,
  )


@contextlib.contextmanager
def local_execution_context(
    *,
    log_dir: Optional[str] = None,
    default_num_clients: int = 0,
    loopback_only: bool = True,
) -> Iterator[tff.framework.SyncExecutionContext]:
  """Starts a local TFF worker and installs a context for it; stops it on exit.

  Usage:

    with local_execution_context() as context:
      process.next(state, data)  # runs on the managed worker

  The worker is stopped when the block exits, also on an exception or
  KeyboardInterrupt, and is killed by the kernel if this process dies.

  Args:
    log_dir: Directory for the worker log (see `start_local_worker`).
    default_num_clients: See `create_remote_execution_context`.
    loopback_only: Confine the worker to loopback (see `start_local_worker`).

  Yields:
    The installed `tff.framework.SyncExecutionContext`.
  """
  worker = start_local_worker(log_dir=log_dir, loopback_only=loopback_only)
  try:
    context = create_remote_execution_context(
        worker.address, default_num_clients=default_num_clients
    )
    with tff.framework.get_context_stack().install(context):
      yield context
  finally:
    worker.stop()
