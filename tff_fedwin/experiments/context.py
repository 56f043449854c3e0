"""The TFF execution context of an experiment, from `--workers`."""

from typing import ContextManager

from tff_fedwin import runtime
from tff_fedwin.experiments import worker_flags


def execution_context(
    workers: str, worker_bind: str = 'loopback'
) -> ContextManager[None]:
  """A context manager for `--workers` (see `worker_flags.parse_workers`).

  '' runs one local worker, 'N' N local workers, 'host:port,...' the running
  workers at those addresses. Workers this run starts listen on loopback only
  unless `worker_bind` is `'all'` (then a warning says they serve every
  interface unauthenticated; docs/runtime.md, 'Loopback confinement').
  """
  num_workers, addresses = worker_flags.parse_workers(workers)
  loopback_only = worker_bind == 'loopback'
  if num_workers is None and not addresses:
    return runtime.local_execution_context(loopback_only=loopback_only)
  if addresses:
    return runtime.multi_worker_execution_context(addresses=addresses)
  return runtime.multi_worker_execution_context(
      num_workers=num_workers, loopback_only=loopback_only
  )
