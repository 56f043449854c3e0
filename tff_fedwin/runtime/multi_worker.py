"""One TFF execution context over several TFF workers, run in parallel.

`create_multi_worker_context(addresses)` splits every computation's clients
across N TFF workers (`host:port` of running `worker_binary` processes) through
TFF's mergeable-computation context
(`tff.backends.native.create_mergeable_comp_execution_context`, over one async
remote context per worker). TFF compiles the computation to a
`tff.framework.MergeableCompForm`: every worker runs the part up to the
aggregation on its slice of the clients (a "subround": contiguous slices in
client order, sizes differing by at most one), the partial aggregates are
merged, and the part after the aggregation runs once, or on every worker when
the result has CLIENTS-placed values. `multi_worker_execution_context` starts
local workers (`tff_fedwin.runtime.start_local_worker`), installs such a context
on TFF's context stack and stops everything on exit.

Parallelism. TFF's async remote contexts make blocking gRPC calls inside their
coroutines, so under the mergeable context (one event loop) the stock contexts
run the workers one after another. Here each worker's context runs on its own
event-loop thread (`ThreadedAsyncContext`), so the subrounds run at the same
time (DESIGN.md sec. 4: 1.9x faster with 2 workers, 3.5x with 4).

Client order. TFF's mergeable context concatenates the CLIENTS-placed results
of the subrounds in the order the subrounds *complete*. That order is the
subround order only when the workers run one after another: with parallel
workers a later subround can finish first, and the clients come back silently
permuted (measured: SCAFFOLD's client states rotated, and the model diverged
from the next round on). For computations whose result has CLIENTS-placed values
this context therefore runs the after-merge subrounds one worker after another,
in subround order; the part up to the merge still runs in parallel.

Merge order. TFF merges partial aggregates in completion order too. With two
workers that is exact (a + b == b + a in floating point); with three or more,
sums can differ in the last bits from run to run.

What runs. TFF's compiler requires that no aggregation depends on the result of
another one. FedAvg (`tff.learning.algorithms.build_weighted_fed_avg`),
`tff_fedwin.algorithms.build_fed_win` (also with a window) and
`tff_fedwin.algorithms.scaffold.build_scaffold` run and equal the single-worker
results. A multi-round process
(`tff_fedwin.algorithms.build_multi_round_process`: round k+1 broadcasts what
round k aggregated) is refused with `ValueError('This computation cannot be
split across TFF workers: ... TFF: Detected one aggregate dependent on another.
...')`. SCAFFOLD gains nothing from several workers: its next round returns
CLIENTS-placed client states, which TFF's after-merge part recomputes, so every
client trains twice per round, and that second pass runs worker by worker (see
above). Run SCAFFOLD on one worker.

Failures. A worker that does not answer at creation raises
`WorkerUnavailableError` (a `RuntimeError` naming its address) after
`ready_timeout_seconds`. On UNAVAILABLE, TFF retries forever
(`tff.framework.AsyncExecutionContext.invoke` retries every
`tff.framework.RetryableError`, backing off to 30 s, and TFF's gRPC stub turns
UNAVAILABLE into one), so a dead worker would hang the round. Here each worker's
stub, on UNAVAILABLE, waits up to `reconnect_timeout_seconds` for the worker's
channel to be ready again: if it is (a transient failure) TFF retries as usual,
otherwise the call fails with `WorkerUnavailableError`, which TFF does not
retry. Close the context after such an error: the other workers' subrounds may
still be running, and `close()` interrupts them. A worker that is alive but
stops answering (e.g. SIGSTOP) is not detected: calls have no deadline, since a
computation may legitimately run for hours.

Usage:

  with multi_worker_execution_context(num_workers=2) as context:
    state = process.initialize()
    state, metrics = process.next(state, client_datasets)
"""

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import grpc
import tensorflow_federated as tff

from tff_fedwin.runtime import workers

# The same message-size limits as the single-worker contexts.
# pylint: disable-next=protected-access
GRPC_CHANNEL_OPTIONS = workers.GRPC_CHANNEL_OPTIONS
_STOP_TIMEOUT_SECONDS = 10.0
_DISPOSE_TIMEOUT_SECONDS = 5.0


WorkerUnavailableError = workers.WorkerUnavailableError


class _EventLoopThread:
  """An asyncio event loop running forever on its own daemon thread."""

  def __init__(self, name: str):
    self.loop = asyncio.new_event_loop()
    self._thread = threading.Thread(target=self._run, name=name, daemon=True)
    self._thread.start()

  @property
  def ident(self) -> Optional[int]:
    return self._thread.ident

  def is_alive(self) -> bool:
    return self._thread.is_alive()

  def _run(self) -> None:
    asyncio.set_event_loop(self.loop)
    try:
      self.loop.run_forever()
    finally:
      # As `asyncio.run`: cancel what is left, then close the loop.
      try:
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
          task.cancel()
        self.loop.run_until_complete(
            asyncio.gather(*tasks, return_exceptions=True)
        )
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
      finally:
        self.loop.close()

  def submit(self, coro) -> concurrent.futures.Future:
    return asyncio.run_coroutine_threadsafe(coro, self.loop)

  def stop(self, timeout_seconds: float) -> None:
    """Stops the loop, cancelling its tasks, and joins the thread.

    A task blocked in a call that never returns keeps the thread alive; it is
    a daemon thread and is left behind after `timeout_seconds`.

    Args:
      timeout_seconds: How long to wait for the thread.
    """
    if not self._thread.is_alive():
      return
    try:
      self.loop.call_soon_threadsafe(self.loop.stop)
    except RuntimeError:  # Closed in the meantime.
      pass
    self._thread.join(timeout_seconds)


class _ConcurrencyRecorder:
  """Counts invocations in flight across the adapters of one context."""

  def __init__(self):
    self._lock = threading.Lock()
    self._in_flight = 0
    self.max_in_flight = 0

  def enter(self) -> None:
    with self._lock:
      self._in_flight += 1
      self.max_in_flight = max(self.max_in_flight, self._in_flight)

  def exit(self) -> None:
    with self._lock:
      self._in_flight -= 1


class _OrderedPhase:
  """Runs the invocations of one computation one at a time, in call order.

  Used for the after-merge part of computations with CLIENTS-placed results
  (see "Client order" in the module docstring). TFF's pool starts the subround
  tasks in subround order and `asyncio.Lock` is FIFO-fair, so holding the lock
  during each invocation makes the subrounds run and complete in subround
  order. The pool collects each result before the next can complete: the next
  one needs a round trip through its worker thread and worker, the pool only
  two event-loop steps.
  """

  def __init__(self):
    self._comp = None
    self._lock = None

  def set(self, comp: Any) -> None:
    """Orders the invocations of `comp` (compared by identity) from now on."""
    self._comp = comp
    # Created unbound; binds to the mergeable context's loop on first use.
    self._lock = asyncio.Lock()

  def clear(self) -> None:
    self._comp = None
    self._lock = None

  def lock_for(self, comp: Any) -> Optional[asyncio.Lock]:
    if self._comp is not None and comp is self._comp:
      return self._lock
    return None


class ThreadedAsyncContext(tff.framework.AsyncContext):
  """Runs another async context's invocations on a dedicated event-loop thread.

  `invoke` is a coroutine for the caller's event loop: it hands the inner
  context's `invoke` coroutine to this adapter's own loop thread and awaits the
  result, so blocking calls inside the inner context (TFF's gRPC calls) block
  only that thread and adapters run in parallel. Cancelling the awaiting task
  cancels the inner invocation.

  Attributes:
    name: A label for the adapter and its thread (the worker's address).
    thread_ident: The `threading.get_ident()` of the loop thread.
    invocation_thread_idents: The idents of the threads on which the inner
      context's invocations ran (by construction only `thread_ident`).
    num_invocations: The number of `invoke` calls so far.
  """

  def __init__(
      self,
      context: tff.framework.AsyncContext,
      *,
      name: str,
      recorder: Optional[_ConcurrencyRecorder] = None,
      ordering: Optional[_OrderedPhase] = None,
  ):
    """Starts the loop thread.

    Args:
      context: The async context whose invocations run on the new thread.
      name: A label for the adapter and its thread.
      recorder: Optional in-flight counter shared by several adapters.
      ordering: Optional `_OrderedPhase` shared by several adapters.
    """
    self._context = context
    self.name = name
    self._recorder = recorder or _ConcurrencyRecorder()
    self._ordering = ordering or _OrderedPhase()
    self._loop_thread = _EventLoopThread(name=f'tff-worker-loop-{name}')
    self.thread_ident = self._loop_thread.ident
    self.invocation_thread_idents = set()
    self.num_invocations = 0
    self._in_flight = 0
    self._closed = False

  @property
  def closed(self) -> bool:
    return self._closed

  @property
  def idle(self) -> bool:
    """True when no invocation is running."""
    return self._in_flight == 0

  def is_thread_alive(self) -> bool:
    return self._loop_thread.is_alive()

  async def invoke(self, comp: Any, arg: Any) -> Any:
    if self._closed:
      raise RuntimeError(f'The execution context for {self.name} is closed.')
    if asyncio.iscoroutine(arg):
      # A coroutine belongs to the caller's loop: await it there.
      arg = await arg
    self.num_invocations += 1
    lock = self._ordering.lock_for(comp)
    if lock is None:
      return await self._dispatch(comp, arg)
    async with lock:
      return await self._dispatch(comp, arg)

  async def _dispatch(self, comp: Any, arg: Any) -> Any:
    self._in_flight += 1
    self._recorder.enter()
    try:
      future = self._loop_thread.submit(self._invoke_on_loop_thread(comp, arg))
      return await asyncio.wrap_future(future)
    finally:
      self._recorder.exit()
      self._in_flight -= 1

  async def _invoke_on_loop_thread(self, comp: Any, arg: Any) -> Any:
    self.invocation_thread_idents.add(threading.get_ident())
    try:
      return await self._context.invoke(comp, arg)
    except Exception as e:
      if self._closed:
        # Interrupted by `close()`: report a cancellation, not the error the
        # interruption caused (nobody may be left to retrieve it).
        raise asyncio.CancelledError(f'{self.name} was closed') from e
      raise

  def run_on_loop_thread(
      self, fn: Callable[[], None], timeout_seconds: float
  ) -> bool:
    """Runs the no-arg `fn` on the loop thread; False if it did not finish."""

    async def call():
      fn()

    try:
      self._loop_thread.submit(call()).result(timeout=timeout_seconds)
      return True
    except (concurrent.futures.TimeoutError, RuntimeError):
      return False

  def close(
      self,
      timeout_seconds: float = _STOP_TIMEOUT_SECONDS,
      interrupt: Optional[Callable[[], None]] = None,
  ) -> None:
    """Refuses new invocations, cancels running ones, stops the thread.

    Idempotent.

    Args:
      timeout_seconds: How long to wait for the thread.
      interrupt: Called after new invocations are refused and before the loop
        is stopped, to unblock a running invocation (e.g. by closing its gRPC
        channel).
    """
    self._closed = True
    if interrupt is not None:
      interrupt()
    self._loop_thread.stop(timeout_seconds)


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
    self.channel = grpc.insecure_channel(address, GRPC_CHANNEL_OPTIONS)
    self._stub = workers.WorkerStub(
        address, self.channel, reconnect_timeout_seconds)
    self._executors = weakref.WeakSet()

    def executor_stack_fn(cardinalities):
      if cardinalities.get(tff.CLIENTS) is None:
        cardinalities[tff.CLIENTS] = default_num_clients
      executor = tff.framework.RemoteExecutor(self._stub)
      executor.set_cardinalities(cardinalities)
      self._executors.add(executor)
      return executor

    # As `workers.create_remote_execution_context`, but asynchronous.
    self.async_context = tff.framework.AsyncExecutionContext(
        executor_fn=tff.framework.ResourceManagingExecutorFactory(
            executor_stack_fn=executor_stack_fn
        ),
        compiler_fn=tff.backends.native.desugar_and_transform_to_native,
        transform_args=tff.tensorflow.transform_args,
        transform_result=tff.tensorflow.transform_result,
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
      recorder: _ConcurrencyRecorder,
      ordering: _OrderedPhase,
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
    """Runs `comp` on `arg` split across the workers (see the module doc).

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

  def close(self, timeout_seconds: float = _STOP_TIMEOUT_SECONDS) -> None:
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


def _check_reachable(
    channels: Sequence[tuple[str, grpc.Channel]], timeout_seconds: float
) -> None:
  """Waits for all channels at once; raises naming the unreachable ones."""
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
  raise workers.WorkerUnavailableError(
      unreachable[0],
      f'{subject} unreachable: no gRPC service answered within '
      f'{timeout_seconds} s. Is a TFF worker_binary serving there?',
  )


def create_multi_worker_context(
    addresses: Sequence[str],
    *,
    default_num_clients: int = 0,
    ready_timeout_seconds: float = 30,
    reconnect_timeout_seconds: float = 10,
) -> MultiWorkerContext:
  """Returns a TFF context that splits each round's clients across workers.

  Clients-placed arguments are split into `len(addresses)` contiguous slices
  (in client order, sizes differing by at most one; fewer slices than workers
  when there are fewer clients), one per worker, and the workers run in
  parallel. Only computations whose aggregations do not depend on one another
  can run (see the module docstring). Install the context with
  `tff.framework.get_context_stack().install(context)` and `close()` it when
  done, or use `multi_worker_execution_context`.

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
  connections = [
      _WorkerConnection(
          address,
          default_num_clients=default_num_clients,
          reconnect_timeout_seconds=reconnect_timeout_seconds,
      )
      for address in addresses
  ]
  try:
    _check_reachable(
        [(c.address, c.channel) for c in connections], ready_timeout_seconds
    )
  except BaseException:
    for connection in connections:
      connection.close()
    raise
  recorder = _ConcurrencyRecorder()
  ordering = _OrderedPhase()
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

  Usage:

    with multi_worker_execution_context(num_workers=2) as context:
      process.next(state, client_data)  # clients split over 2 local workers

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
  if num_workers is not None and (
      not isinstance(num_workers, int)
      or isinstance(num_workers, bool)
      or num_workers < 1
  ):
    raise ValueError(f'`num_workers` must be an int >= 1, got {num_workers!r}.')
  started = []
  context = None
  try:
    if num_workers is not None:
      for _ in range(num_workers):
        started.append(workers.start_local_worker(
            log_dir=log_dir, loopback_only=loopback_only))
      addresses = [w.address for w in started]
    context = create_multi_worker_context(addresses)
    with tff.framework.get_context_stack().install(context):
      yield context
  finally:
    try:
      if context is not None:
        context.close()
    finally:
      for worker in started:
        worker.stop()
