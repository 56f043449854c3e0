"""Tests for tff_fedwin.runtime.worker_stub: a dead worker fails, naming it."""

import re
import time

import grpc
import numpy as np
import portpicker
import pytest
import tensorflow_federated as tff

from tff_fedwin import runtime
from tff_fedwin.runtime import worker_stub


@tff.tensorflow.computation(np.float32)
def _add_one(x):
  return x + 1.0


def test_dead_worker_raises_naming_it_instead_of_hanging(tmp_path):
  # TFF retries UNAVAILABLE forever; the managed context gives up after
  # reconnect_timeout_seconds with an error that names the worker.
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  try:
    context = runtime.create_remote_execution_context(
        worker.address, reconnect_timeout_seconds=2
    )
    with tff.framework.get_context_stack().install(context):
      assert _add_one(1.0) == 2.0
      worker.stop()
      start = time.monotonic()
      with pytest.raises(
          runtime.WorkerUnavailableError,
          match=f'{re.escape(worker.address)} is unreachable',
      ):
        _add_one(2.0)
    assert time.monotonic() - start < 60
  finally:
    worker.stop()


class _UnavailableStub:
  """Stands in for TFF's gRPC stub: every call fails as UNAVAILABLE."""

  def compute(self, request):
    del request
    raise tff.framework.RetryableError('UNAVAILABLE')

  def dispose(self, request):
    del request
    raise tff.framework.RetryableError('UNAVAILABLE')


@pytest.fixture
def unreachable_stub():
  """A `WorkerStub` to a port nobody serves on, over `_UnavailableStub`.

  The channel is left to garbage collection: closing it while gRPC's
  connectivity poller (started by the readiness wait) still runs makes that
  thread raise.
  """
  address = f'localhost:{portpicker.pick_unused_port()}'
  channel = grpc.insecure_channel(address)
  stub = worker_stub.WorkerStub(address, channel, reconnect_timeout_seconds=0.5)
  stub._stub = _UnavailableStub()  # pylint: disable=protected-access
  return address, stub


def test_unavailable_worker_that_does_not_come_back_raises(unreachable_stub):
  address, stub = unreachable_stub
  with pytest.raises(
      worker_stub.WorkerUnavailableError,
      match=f'TFF worker {address} is unreachable: compute failed',
  ) as info:
    stub.compute(None)
  assert info.value.address == address
  assert stub.dispose(None) is None  # Disposal failures are ignored.


def test_closed_stub_leaves_the_retry_to_tff(unreachable_stub):
  _, stub = unreachable_stub
  stub.close()
  # The stub's own error, re-raised unchanged (not a WorkerUnavailableError).
  with pytest.raises(tff.framework.RetryableError, match='^UNAVAILABLE$'):
    stub.compute(None)
  assert stub.dispose(None) is None


def test_describe_rpc_error_without_a_grpc_call():
  assert worker_stub.describe_rpc_error(ValueError('x')) == "ValueError('x')"
