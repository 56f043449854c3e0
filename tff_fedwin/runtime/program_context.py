"""`tff.program.NativeFederatedContext`s over managed or running TFF workers.

TFF's program API (`tff.learning.programs.train_model`, `tff.program` data
sources, state and release managers) needs a `tff.program.FederatedContext`
installed; `tff.program.NativeFederatedContext` is TFF's own, over an async
execution context. `local_federated_context` starts a local worker and
installs one over it, with `local_execution_context`'s lifecycle guarantees;
`remote_federated_context` does the same over running workers
(docs/program_api.md, docs/runtime.md, 'Why we manage the worker ourselves',
'Several workers').
"""

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Optional, Union

import grpc
import tensorflow_federated as tff

from tff_fedwin.runtime import contexts
from tff_fedwin.runtime import driver_memory
from tff_fedwin.runtime import multi_worker
from tff_fedwin.runtime import threaded_context
from tff_fedwin.runtime import worker_stub
from tff_fedwin.runtime import workers

_MAX_PORT = 65535


class _SyncContextAsAsync(tff.framework.AsyncContext):
  """An async context running a sync context's invocations in a thread.

  `MultiWorkerContext` is a `tff.framework.SyncContext`; the program API
  needs an async one. Each invocation runs in the caller loop's default
  thread pool, so the loop (release managers, evaluations) keeps running;
  `MultiWorkerContext` runs its invocations one after another.
  """

  def __init__(self, context: tff.framework.SyncContext):
    self._context = context

  async def invoke(self, comp: Any, arg: Any) -> Any:
    if asyncio.iscoroutine(arg):
      arg = await arg
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, self._context.invoke, comp, arg)


def parse_addresses(addresses: Union[str, Sequence[str]]) -> tuple[str, ...]:
  """`'host:port,...'` (as `--workers`) or a sequence of them -> a tuple.

  Args:
    addresses: A comma-separated string or a sequence of `host:port` strings.

  Returns:
    The addresses, stripped, in order.

  Raises:
    ValueError: Naming `addresses`, unless every entry is `host:port` with a
      non-empty host and a port in 1..65535.
  """
  if isinstance(addresses, str):
    items = tuple(a.strip() for a in addresses.split(','))
  elif isinstance(addresses, Sequence):
    items = tuple(addresses)
  else:
    items = ()
  allowed = (
      "a 'host:port,...' string or a sequence of 'host:port' strings "
      f'with ports 1-{_MAX_PORT}'
  )
  for item in items or ('',):
    host, _, port = (
        item.rpartition(':') if isinstance(item, str) else ('', '', '')
    )
    if not host or not port.isdigit() or not 1 <= int(port) <= _MAX_PORT:
      raise ValueError(
          f'`addresses` must be {allowed}; got {item!r} in {addresses!r}.'
      )
  return items


@contextlib.contextmanager
def _one_worker_async_context(
    address: str,
    *,
    default_num_clients: int,
    reconnect_timeout_seconds: float,
    ready_timeout_seconds: Optional[float] = None,
) -> Iterator[tff.framework.AsyncContext]:
  """An async remote context on its own loop thread; closed on exit.

  TFF's async remote context blocks inside its coroutines, so it runs on a
  `ThreadedAsyncContext` thread and the caller's loop stays free.
  """
  channel = grpc.insecure_channel(address, worker_stub.GRPC_CHANNEL_OPTIONS)
  stub = worker_stub.WorkerStub(address, channel, reconnect_timeout_seconds)
  try:
    if ready_timeout_seconds is not None:
      multi_worker.check_reachable([(address, channel)], ready_timeout_seconds)
    inner = tff.framework.AsyncExecutionContext(
        **contexts.remote_context_args(
            stub, default_num_clients=default_num_clients
        )
    )
    adapter = threaded_context.ThreadedAsyncContext(inner, name=address)
  except BaseException:
    channel.close()
    raise

  def interrupt():
    stub.close()
    channel.close()

  try:
    yield adapter
  finally:
    adapter.close(interrupt=interrupt)


@contextlib.contextmanager
def _installed(
    async_context: tff.framework.AsyncContext,
) -> Iterator[tff.program.NativeFederatedContext]:
  """Installs a `NativeFederatedContext` over `async_context` while open."""
  context = tff.program.NativeFederatedContext(async_context)
  trim_seconds = driver_memory.driver_trim_seconds()
  with (
      tff.framework.get_context_stack().install(context),
      driver_memory.periodic_malloc_trim(trim_seconds),
  ):
    yield context


@contextlib.contextmanager
def local_federated_context(
    *,
    log_dir: Optional[str] = None,
    default_num_clients: int = 0,
    loopback_only: bool = True,
) -> Iterator[tff.program.NativeFederatedContext]:
  """Starts a local TFF worker and installs a federated (program) context.

  Usage:

    with local_federated_context():
      asyncio.run(tff.learning.programs.train_model(...))

  As `local_execution_context`: the worker is stopped when the block exits,
  also on an exception or KeyboardInterrupt, and is killed by the kernel if
  this process dies; the previous context is restored.

  Args:
    log_dir: Directory for the worker log (see `start_local_worker`).
    default_num_clients: Number of clients when a computation's arguments do
      not determine it.
    loopback_only: Confine the worker to loopback (see `start_local_worker`).

  Yields:
    The installed `tff.program.NativeFederatedContext`.
  """
  worker = workers.start_local_worker(
      log_dir=log_dir, loopback_only=loopback_only
  )
  try:
    with _one_worker_async_context(
        worker.address,
        default_num_clients=default_num_clients,
        reconnect_timeout_seconds=10.0,
    ) as async_context:
      with _installed(async_context) as context:
        yield context
  finally:
    worker.stop()


@contextlib.contextmanager
def remote_federated_context(
    addresses: Union[str, Sequence[str]],
    *,
    default_num_clients: int = 0,
    ready_timeout_seconds: float = 30.0,
    reconnect_timeout_seconds: float = 10.0,
) -> Iterator[tff.program.NativeFederatedContext]:
  """Installs a federated (program) context over running TFF workers.

  One address: TFF's async remote context on that worker. Several: each
  computation's clients are split across the workers as in
  `create_multi_worker_context` (docs/runtime.md, 'Several workers'), which runs
  only computations whose aggregations do not depend on one another (one
  training or evaluation round per call, as `train_model` makes). The workers
  are left running; on exit the context is removed and its channels closed, also
  on an exception or KeyboardInterrupt.

  Args:
    addresses: `'host:port,...'` (the `--workers` syntax) or a sequence of
      `host:port` strings.
    default_num_clients: Number of clients (per worker, with several) when a
      computation's arguments do not determine it.
    ready_timeout_seconds: How long to wait for every worker to answer.
    reconnect_timeout_seconds: How long a worker whose call failed with
      UNAVAILABLE may take to answer again before the computation fails.

  Yields:
    The installed `tff.program.NativeFederatedContext`.

  Raises:
    ValueError: If `addresses` is not as described (before any connection).
    WorkerUnavailableError: If a worker does not answer within
      `ready_timeout_seconds`; the message names it.
  """
  addresses = parse_addresses(addresses)
  if len(addresses) == 1:
    with _one_worker_async_context(
        addresses[0],
        default_num_clients=default_num_clients,
        reconnect_timeout_seconds=reconnect_timeout_seconds,
        ready_timeout_seconds=ready_timeout_seconds,
    ) as async_context:
      with _installed(async_context) as context:
        yield context
    return
  sync_context = multi_worker.create_multi_worker_context(
      list(addresses),
      default_num_clients=default_num_clients,
      ready_timeout_seconds=ready_timeout_seconds,
      reconnect_timeout_seconds=reconnect_timeout_seconds,
  )
  try:
    with _installed(_SyncContextAsAsync(sync_context)) as context:
      yield context
  finally:
    sync_context.close()
