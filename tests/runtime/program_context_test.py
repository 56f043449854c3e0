"""Tests for tff_fedwin.runtime.program_context: TFF program contexts."""

import asyncio
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests.runtime import processes
from tff_fedwin import runtime
from tff_fedwin.runtime import program_context


@tff.tensorflow.computation(np.float32)
def _add_one(x):
  return x + 1.0


@tff.tensorflow.computation(np.str_)
def _id_length(client_id):
  return tf.strings.length(client_id)


@tff.federated_computation(tff.FederatedType(np.str_, tff.CLIENTS))
def _sum_of_id_lengths(client_ids):
  return tff.federated_sum(tff.federated_map(_id_length, client_ids))


def _run(comp, *args):
  """Invokes `comp` in the installed federated context; the value."""

  async def call():
    return await tff.program.materialize_value(comp(*args))

  return asyncio.run(call())


def _own_worker(log_dir):
  (worker,) = [
      w for w in runtime.running_workers() if w.log_path.startswith(log_dir)
  ]
  return worker


def test_installs_a_federated_context_and_restores_the_previous(tmp_path):
  before = tff.framework.get_context_stack().current
  with runtime.local_federated_context(log_dir=str(tmp_path)) as context:
    assert tff.framework.get_context_stack().current is context
    assert isinstance(context, tff.program.NativeFederatedContext)
    tff.program.check_in_federated_context()  # Raises outside one.
    assert _run(_add_one, 1.0) == 2.0
    # 'a' + 'bcd' + 'ef': 1 + 3 + 2 characters.
    assert _run(_sum_of_id_lengths, ['a', 'bcd', 'ef']) == 6
    worker = _own_worker(str(tmp_path))
    assert processes.pid_alive(worker.pid)
  assert tff.framework.get_context_stack().current is before
  assert processes.wait_until_dead(worker.pid, timeout_seconds=5)
  assert worker not in runtime.running_workers()


def test_outside_the_block_train_model_check_fails():
  with pytest.raises(ValueError, match='tff.program.FederatedContext'):
    tff.program.check_in_federated_context()


@pytest.mark.parametrize('error', [ZeroDivisionError, KeyboardInterrupt])
def test_worker_stopped_and_context_restored_on_exception(tmp_path, error):
  before = tff.framework.get_context_stack().current
  with pytest.raises(error, match='raised in the block'):
    with runtime.local_federated_context(log_dir=str(tmp_path)):
      worker = _own_worker(str(tmp_path))
      raise error('raised in the block')
  assert processes.wait_until_dead(worker.pid, timeout_seconds=5)
  assert tff.framework.get_context_stack().current is before


@pytest.mark.parametrize('num_workers', [1, 2])
def test_remote_context_over_running_workers_leaves_them_running(
    tmp_path, num_workers
):
  started = [
      runtime.start_local_worker(log_dir=str(tmp_path))
      for _ in range(num_workers)
  ]
  try:
    addresses = ','.join(w.address for w in started)
    before = tff.framework.get_context_stack().current
    with runtime.remote_federated_context(addresses) as context:
      assert isinstance(context, tff.program.FederatedContext)
      tff.program.check_in_federated_context()
      assert _run(_add_one, 2.0) == 3.0
      # Four ids of 4 characters each, split across the workers: 16.
      assert _run(_sum_of_id_lengths, ['0000', '0001', '0002', '0003']) == 16
    assert tff.framework.get_context_stack().current is before
    assert all(w.is_running() for w in started)
  finally:
    for worker in started:
      worker.stop()


@pytest.mark.parametrize(
    'addresses',
    ['', 'localhost', 'localhost:0', 'localhost:70000', ':80', ['h:1', 3], 7],
)
def test_bad_addresses_are_one_line_value_errors(addresses):
  with pytest.raises(ValueError, match='^`addresses` must be .*host:port'):
    with runtime.remote_federated_context(addresses):
      pass


def test_addresses_parse_as_workers_flag():
  assert program_context.parse_addresses('a:1, [::1]:2') == ('a:1', '[::1]:2')
  assert program_context.parse_addresses(['a:1']) == ('a:1',)


def test_unreachable_worker_is_named(tmp_path):
  worker = runtime.start_local_worker(log_dir=str(tmp_path))
  address = worker.address
  worker.stop()
  with pytest.raises(runtime.WorkerUnavailableError, match=re.escape(address)):
    with runtime.remote_federated_context(address, ready_timeout_seconds=1):
      pass
