"""One TFF execution context over several TFF workers, run in parallel.

`create_multi_worker_context(addresses)` splits every computation's clients
across running workers; `multi_worker_execution_context` starts local workers,
installs such a context and undoes everything on exit. What runs, in which
order, and how failures surface: docs/runtime.md, 'Several workers'.

Usage:

  with multi_worker_execution_context(num_workers=2) as context:
    state = process.initialize()
    state, metrics = process.next(state, client_datasets)
"""

import contextlib
import functools
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import grpc
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.runtime import contexts
from tff_fedwin.runtime import driver_memory
from tff_fedwin.runtime import threaded_context
from tff_fedwin.runtime import worker_stub
from tff_fedwin.runtime import workers

_DISPOSE_TIMEOUT_SECONDS = 5.0

ThreadedAsyncContext = threaded_context.ThreadedAsyncContext
WorkerUnavailableError = worker_stub.WorkerUnavailableError


class _WorkerConnection:
  """A channel to one worker and the async TFF context using it."""

  def __init__(
      self,
      address: str,
      *,
      default_num_clients: int,
      reconnect_timeout_seconds: float,
  ):
    self.address = address
    self.channel = grpc.insecure_channel(
        address, worker_stub.GRPC_CHANNEL_OPTIONS
    )
    self._stub = worker_stub.WorkerStub(
        address, self.channel, reconnect_timeout_seconds
    )
    self._executors = weakref.WeakSet()
    # As `contexts.create_remote_execution_context`, but asynchronous.
    self.async_context = tff.framework.AsyncExecutionContext(
        **contexts.remote_context_args(
            self._stub,
            default_num_clients=default_num_clients,
            on_executor=self._executors.add,
        )
    )

  def dispose_executors(self) -> None:
    """Frees this context's executors on the worker (errors are ignored)."""
    for executor in list(self._executors):
      executor.close()

  def close(self) -> None:
    """Closes the channel; calls running on it fail at once."""
    self._stub.close()
    self.channel.close()


def _has_clients_values(type_spec: tff.Type) -> bool:
  """Whether `type_spec` contains a CLIENTS-placed, not all-equal value."""
  return tff.types.contains(
      type_spec,
      lambda t: isinstance(t, tff.FederatedType)
      and t.placement is tff.CLIENTS
      and not t.all_equal,
  )


@functools.lru_cache(maxsize=128)
def _compile_to_mergeable_form(comp) -> tff.framework.MergeableCompForm:
  """TFF's mergeable compiler, cached as TFF's mergeable context caches it."""
  try:
    return tff.backends.native.compile_to_mergeable_comp_form(comp)
  except ValueError as e:
    tff_message = str(e)
    if len(tff_message) > 300:
      tff_message = tff_message[:300] + '...'
    raise ValueError(
        "This computation cannot be split across TFF workers: TFF's "
        'mergeable-computation form needs aggregations that do not depend on '
        'one another (e.g. one training round per call, not a multi-round '
        'process). Run it on a single worker. TFF: ' + tff_message
    ) from e


class MultiWorkerContext(tff.framework.SyncContext):
  """A synchronous TFF context splitting clients across several workers.

  Build with `create_multi_worker_context`; `close()` when done (or use
  `multi_worker_execution_context`). Invocations from several Python threads
  run one after another.

  Attributes:
    addresses: The workers' `host:port`, in subround order.
    worker_contexts: One `ThreadedAsyncContext` per worker, same order.
  """

  def __init__(
      self,
      connections: Sequence[_WorkerConnection],
      worker_contexts: Sequence[ThreadedAsyncContext],
      recorder: threaded_context.ConcurrencyRecorder,
      ordering: threaded_context.OrderedPhase,
  ):
    """Internal: use `create_multi_worker_context`."""
    self._connections = tuple(connections)
    self.worker_contexts = tuple(worker_contexts)
    self.addresses = tuple(c.address for c in connections)
    self._recorder = recorder
    self._ordering = ordering
    self._invoke_lock = threading.Lock()
    self._context = tff.backends.native.create_mergeable_comp_execution_context(
        self.worker_contexts
    )
    self._closed = False

  @property
  def closed(self) -> bool:
    return self._closed

  @property
  def max_concurrent_invocations(self) -> int:
    """The most worker invocations ever dispatched and not yet finished."""
    return self._recorder.max_in_flight

  def invoke(self, comp: Any, arg: Any) -> Any:
    """Runs `comp` on `arg` split across the workers.

    How the clients are split and merged: docs/runtime.md, 'Several workers'.

    Args:
      comp: A `tff.framework.ConcreteComputation`, or an already compiled
        `tff.framework.MergeableCompForm`.
      arg: Its argument as packed by TFF, or `None`.

    Returns:
      The result, as TFF's single-worker contexts return it.

    Raises:
      ValueError: If an aggregation in `comp` depends on another one.
      WorkerUnavailableError: If a worker stops answering.
      RuntimeError: If the context is closed.
    """
    with self._invoke_lock:
      if self._closed:
        raise RuntimeError(
            'This multi-worker execution context (workers '
            f'{", ".join(self.addresses)}) is closed.'
        )
      if isinstance(comp, tff.framework.MergeableCompForm):
        form = comp
      else:
        form = _compile_to_mergeable_form(comp)
      if _has_clients_values(form.after_merge.type_signature.result):
        self._ordering.set(form.after_merge)
      try:
        return self._context.invoke(form, arg)
      finally:
        self._ordering.clear()

  def close(
      self, timeout_seconds: float = threaded_context.STOP_TIMEOUT_SECONDS
  ) -> None:
    """Stops the event-loop threads and closes the channels (idempotent).

    This context's executors on idle workers are disposed of; invocations
    still running (e.g. on the healthy workers after a `WorkerUnavailableError`)
    are interrupted. The workers themselves keep running.

    Args:
      timeout_seconds: How long to wait for each worker's thread.
    """
    if self._closed:
      return
    self._closed = True
    for connection, worker_context in zip(
        self._connections, self.worker_contexts
    ):
      if worker_context.idle:
        worker_context.run_on_loop_thread(
            connection.dispose_executors,
            min(timeout_seconds, _DISPOSE_TIMEOUT_SECONDS),
        )
      worker_context.close(timeout_seconds, interrupt=connection.close)

  def __repr__(self) -> str:
    state = 'closed' if self._closed else 'open'
    return f'MultiWorkerContext({list(self.addresses)}, {state})'


def check_reachable(
    channels: Sequence[tuple[str, grpc.Channel]], timeout_seconds: float
) -> None:
  """Waits for all (address, channel) at once.

  Raises:
    WorkerUnavailableError: Naming the workers that did not answer in time.
  """
  futures = [(a, grpc.channel_ready_future(c)) for a, c in channels]
  unreachable = []
  try:
    for address, future in futures:
      try:
        # The futures progress together: after the first wait has used up the
        # timeout, the others only need checking.
        future.result(timeout=0.0 if unreachable else timeout_seconds)
      except grpc.FutureTimeoutError:
        unreachable.append(address)
  finally:
    for _, future in futures:
      future.cancel()
  if not unreachable:
    return
  if len(unreachable) == 1:
    subject = f'TFF worker {unreachable[0]} is'
  else:
    subject = f'TFF workers {", ".join(unreachable)} are'
  raise worker_stub.WorkerUnavailableError(
      unreachable[0],
      f'{subject} unreachable: no gRPC service answered within '
      f'{timeout_seconds} s. Is a TFF worker_binary serving there?',
  )


def _check_addresses(addresses: Any) -> None:
  """Raises ValueError unless `addresses` is a non-empty list of strings."""
  if isinstance(addresses, str) or not isinstance(addresses, Sequence):
    raise ValueError(
        '`addresses` must be a sequence of "host:port" strings, got '
        f'{addresses!r}.'
    )
  if not addresses:
    raise ValueError('`addresses` must name at least one TFF worker.')
  for address in addresses:
    if not isinstance(address, str) or not address:
      raise ValueError(
          f'Worker addresses must be "host:port" strings, got {address!r}.'
      )


def _connect(
    addresses: Sequence[str],
    *,
    default_num_clients: int,
    ready_timeout_seconds: float,
    reconnect_timeout_seconds: float,
) -> list[_WorkerConnection]:
  """One connection per worker, once all answer; none left open on failure."""
  connections = [
      _WorkerConnection(
          address,
          default_num_clients=default_num_clients,
          reconnect_timeout_seconds=reconnect_timeout_seconds,
      )
      for address in addresses
  ]
  try:
    check_reachable(
        [(c.address, c.channel) for c in connections], ready_timeout_seconds
    )
  except BaseException:
    for connection in connections:
      connection.close()
    raise
  return connections


def create_multi_worker_context(
    addresses: Sequence[str],
    *,
    default_num_clients: int = 0,
    ready_timeout_seconds: float = 30,
    reconnect_timeout_seconds: float = 10,
) -> MultiWorkerContext:
  """Returns a TFF context that splits each round's clients across workers.

  One contiguous slice of the clients per worker, run in parallel
  (docs/runtime.md, 'Several workers'). Install it with
  `tff.framework.get_context_stack().install(context)` and `close()` it, or
  use `multi_worker_execution_context`.

  Args:
    addresses: `host:port` of each running TFF worker.
    default_num_clients: Number of clients *on each worker* when a
      computation's arguments do not determine it.
    ready_timeout_seconds: How long to wait for all workers to answer.
    reconnect_timeout_seconds: How long a worker whose call failed with
      UNAVAILABLE may take to answer again before the computation fails.

  Returns:
    A `MultiWorkerContext` (a `tff.framework.SyncContext`).

  Raises:
    ValueError: If `addresses` is empty or not a sequence of strings.
    WorkerUnavailableError: If a worker does not answer within
      `ready_timeout_seconds`; the message names its address.
  """
  _check_addresses(addresses)
  connections = _connect(
      addresses,
      default_num_clients=default_num_clients,
      ready_timeout_seconds=ready_timeout_seconds,
      reconnect_timeout_seconds=reconnect_timeout_seconds,
  )
  recorder = threaded_context.ConcurrencyRecorder()
  ordering = threaded_context.OrderedPhase()
  worker_contexts = [
      ThreadedAsyncContext(
          c.async_context, name=c.address, recorder=recorder, ordering=ordering
      )
      for c in connections
  ]
  return MultiWorkerContext(connections, worker_contexts, recorder, ordering)


@contextlib.contextmanager
def multi_worker_execution_context(
    num_workers: Optional[int] = None,
    addresses: Optional[Sequence[str]] = None,
    *,
    log_dir: Optional[str] = None,
    loopback_only: bool = True,
) -> Iterator[MultiWorkerContext]:
  """Installs a multi-worker context; on exit undoes everything it did.

  On exit, also on an exception or KeyboardInterrupt, the context is removed
  from TFF's context stack and closed (its event-loop threads stopped), and the
  local workers this call started are stopped. Workers given by `addresses` are
  left running. Start local workers from the main thread (see
  `tff_fedwin.runtime.workers`).

  Args:
    num_workers: Number of local workers to start (`start_local_worker`).
    addresses: `host:port` of running workers to use instead; exactly one of
      `num_workers` and `addresses` must be given.
    log_dir: Directory for the local workers' logs (see `start_local_worker`);
      unused with `addresses`.
    loopback_only: Confine the local workers to loopback (see
      `start_local_worker`); unused with `addresses`.

  Yields:
    The installed `MultiWorkerContext`.

  Raises:
    ValueError: If not exactly one of `num_workers`, `addresses` is given, or
      `num_workers` is not an int >= 1.
    RuntimeError: If a worker cannot be started or reached.
  """
  if (num_workers is None) == (addresses is None):
    raise ValueError('Pass exactly one of `num_workers` and `addresses`.')
  if num_workers is not None:
    checks.check_int('num_workers', num_workers, minimum=1)
  trim_seconds = driver_memory.driver_trim_seconds()
  started = []
  context = None
  try:
    if num_workers is not None:
      for _ in range(num_workers):
        started.append(
            workers.start_local_worker(
                log_dir=log_dir, loopback_only=loopback_only
            )
        )
      addresses = [w.address for w in started]
    context = create_multi_worker_context(addresses)
    with (
        tff.framework.get_context_stack().install(context),
        driver_memory.periodic_malloc_trim(trim_seconds),
    ):
      yield context
  finally:
    try:
      if context is not None:
        context.close()
    finally:
      for worker in started:
        worker.stop()
