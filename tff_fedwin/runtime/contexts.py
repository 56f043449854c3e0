"""TFF execution contexts over one worker, and the managed local context.

`create_remote_execution_context` connects to a running TFF worker;
`local_execution_context` starts a local worker, installs a context on it and
stops the worker on exit (docs/runtime.md, 'Why we manage the worker
ourselves').
"""

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Optional

import grpc
import tensorflow_federated as tff

from tff_fedwin.runtime import driver_memory
from tff_fedwin.runtime import worker_stub
from tff_fedwin.runtime import workers


def remote_context_args(
    stub: tff.framework.RemoteExecutorStub,
    *,
    default_num_clients: int,
    on_executor: Optional[Callable[[Any], None]] = None,
) -> dict[str, Any]:
  """Keyword arguments of a TFF (a)sync execution context over `stub`.

  The parts of TFF's own local C++ context, minus the process management.

  Args:
    stub: The stub to the worker.
    default_num_clients: Number of clients when a computation's arguments do
      not determine it.
    on_executor: Called with every executor created, if given.
  """

  def executor_stack_fn(cardinalities):
    if cardinalities.get(tff.CLIENTS) is None:
      cardinalities[tff.CLIENTS] = default_num_clients
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    if on_executor is not None:
      on_executor(executor)
    return executor

  return dict(
      executor_fn=tff.framework.ResourceManagingExecutorFactory(
          executor_stack_fn=executor_stack_fn
      ),
      compiler_fn=tff.backends.native.desugar_and_transform_to_native,
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result,
  )


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
  channel = grpc.insecure_channel(address, worker_stub.GRPC_CHANNEL_OPTIONS)
  stub = worker_stub.WorkerStub(address, channel, reconnect_timeout_seconds)
  return tff.framework.SyncExecutionContext(
      **remote_context_args(stub, default_num_clients=default_num_clients)
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
  KeyboardInterrupt, and is killed by the kernel if this process dies. While
  the block runs, this process returns freed heap memory every 2 s
  (`driver_memory`).

  Args:
    log_dir: Directory for the worker log (see `start_local_worker`).
    default_num_clients: See `create_remote_execution_context`.
    loopback_only: Confine the worker to loopback (see `start_local_worker`).

  Yields:
    The installed `tff.framework.SyncExecutionContext`.
  """
  trim_seconds = driver_memory.driver_trim_seconds()
  worker = workers.start_local_worker(
      log_dir=log_dir, loopback_only=loopback_only
  )
  try:
    context = create_remote_execution_context(
        worker.address, default_num_clients=default_num_clients
    )
    with (
        tff.framework.get_context_stack().install(context),
        driver_memory.periodic_malloc_trim(trim_seconds),
    ):
      yield context
  finally:
    worker.stop()
