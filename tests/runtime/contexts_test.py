"""Tests for tff_fedwin.runtime.contexts: a context stops the worker it starts."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests.runtime import processes
from tff_fedwin import runtime
from tff_fedwin.runtime import workers


@tff.tensorflow.computation(np.float32)
def _add_one(x):
  return x + 1.0


def test_context_runs_computations_and_stops_its_worker(tmp_path):
  with runtime.local_execution_context(log_dir=str(tmp_path)):
    assert _add_one(1.0) == 2.0
    (worker,) = [
        w
        for w in runtime.running_workers()
        if w.log_path.startswith(str(tmp_path))
    ]
    assert processes.pid_alive(worker.pid)
  assert not worker.is_running()
  assert worker not in runtime.running_workers()


def test_worker_stopped_when_block_raises(tmp_path):
  with pytest.raises(ZeroDivisionError, match='division by zero'):
    with runtime.local_execution_context(log_dir=str(tmp_path)):
      (worker,) = [
          w
          for w in runtime.running_workers()
          if w.log_path.startswith(str(tmp_path))
      ]
      _ = 1 / 0
  assert processes.wait_until_dead(worker.pid, timeout_seconds=5)


class _Started(Exception):
  pass


@pytest.mark.parametrize('loopback_only', [True, False])
def test_contexts_pass_loopback_only_to_their_workers(
    monkeypatch, loopback_only
):
  calls = []

  def fake_start_local_worker(**kwargs):
    calls.append(kwargs['loopback_only'])
    raise _Started()

  monkeypatch.setattr(workers, 'start_local_worker', fake_start_local_worker)
  with pytest.raises(_Started):
    with runtime.local_execution_context(loopback_only=loopback_only):
      pass
  with pytest.raises(_Started):
    with runtime.multi_worker_execution_context(
        num_workers=1, loopback_only=loopback_only
    ):
      pass
  assert calls == [loopback_only, loopback_only]
