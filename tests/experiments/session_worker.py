"""Whole runs on the test session's TFF worker instead of one of their own.

With `--workers=''` and `--worker_bind=loopback`, `run_experiment` starts one
local worker for the run and stops it at the end
(`tff_fedwin.experiments.context.execution_context` ->
`runtime.local_execution_context`): over a second of wall time per run, for
tests that check numbers and files, not workers. `run_experiment` here, and any
run in a `local_runs_on` block, runs the package's code with that one call
answered by the session's context (tests/conftest.py), which is the same thing:
a loopback-only local worker that this process started, on the same file
system, so `auto` transfers still go through files. Other `--workers` or
`--worker_bind` values reach the package's own `execution_context`. Which
context the flags choose is tested in context_test.py, starting and stopping
workers in tests/runtime/.
"""

from collections.abc import Iterator
import contextlib
from typing import Any

import pytest
import tensorflow_federated as tff

from tff_fedwin import experiments
from tff_fedwin.experiments import context
from tff_fedwin.experiments import worker_flags


@contextlib.contextmanager
def _installed(session_context):
  """`session_context` installed for the block, as `local_execution_context`
  installs the context of the worker it starts."""
  with tff.framework.get_context_stack().install(session_context):
    yield session_context


@contextlib.contextmanager
def local_runs_on(session_context: Any) -> Iterator[None]:
  """In the block, runs asking for one local loopback worker use
  `session_context`'s instead (`run_experiment`, `script_runs.run_in_process`).

  Args:
    session_context: The session's execution context (the
      `tff_execution_context` fixture).
  """
  original = context.execution_context

  def execution_context(workers: str, worker_bind: str = 'loopback'):
    num_workers, addresses = worker_flags.parse_workers(workers)
    if num_workers is None and not addresses and worker_bind == 'loopback':
      return _installed(session_context)
    return original(workers, worker_bind)

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(context, 'execution_context', execution_context)
    yield


def run_experiment(
    session_context: Any, config: experiments.ExperimentConfig, **kwargs
) -> dict[str, Any]:
  """`experiments.run_experiment(config, **kwargs)` on `session_context`'s
  worker if `config` asks for one local loopback worker (`local_runs_on`).

  Args:
    session_context: The session's execution context (the
      `tff_execution_context` fixture).
    config: The experiment.
    **kwargs: Passed to `experiments.run_experiment`.
  """
  with local_runs_on(session_context):
    return experiments.run_experiment(config, **kwargs)
