"""Tests for tff_fedwin.runtime.threaded_context (no TFF worker needed)."""

import asyncio
import threading

import pytest
import tensorflow_federated as tff

from tff_fedwin.runtime import threaded_context


class _RecordingContext(tff.framework.AsyncContext):
  """Returns `(comp, arg)`; records the thread and runs `hook` if set."""

  def __init__(self, hook=None):
    self.thread_idents = []
    self._hook = hook

  async def invoke(self, comp, arg):
    self.thread_idents.append(threading.get_ident())
    if self._hook is not None:
      self._hook()
    return comp, arg


def test_invocations_run_on_the_adapter_thread_until_closed():
  inner = _RecordingContext()
  adapter = threaded_context.ThreadedAsyncContext(inner, name='fake')
  try:
    assert asyncio.run(adapter.invoke('comp', 1)) == ('comp', 1)
    assert inner.thread_idents == [adapter.thread_ident]
    assert adapter.thread_ident != threading.get_ident()
    assert adapter.invocation_thread_idents == {adapter.thread_ident}
    assert adapter.num_invocations == 1
    assert adapter.idle
  finally:
    adapter.close()
  assert adapter.closed
  assert not adapter.is_thread_alive()
  with pytest.raises(RuntimeError, match='fake is closed'):
    asyncio.run(adapter.invoke('comp', 1))


def test_blocking_invocations_of_two_adapters_overlap():
  # Each inner invocation blocks its thread until both have started: this
  # finishes only if the two adapters run at the same time.
  barrier = threading.Barrier(2, timeout=30)
  recorder = threaded_context.ConcurrencyRecorder()
  adapters = [
      threaded_context.ThreadedAsyncContext(
          _RecordingContext(hook=barrier.wait),
          name=f'fake{i}',
          recorder=recorder,
      )
      for i in range(2)
  ]

  async def both():
    return await asyncio.gather(
        *(a.invoke('comp', i) for i, a in enumerate(adapters))
    )

  try:
    assert asyncio.run(both()) == [('comp', 0), ('comp', 1)]
  finally:
    for adapter in adapters:
      adapter.close()
  assert recorder.max_in_flight == 2


def test_ordered_phase_orders_only_the_computation_it_was_set_for():
  ordering = threaded_context.OrderedPhase()
  comp, other = object(), object()
  assert ordering.lock_for(comp) is None
  ordering.set(comp)
  assert isinstance(ordering.lock_for(comp), asyncio.Lock)
  assert ordering.lock_for(other) is None
  ordering.clear()
  assert ordering.lock_for(comp) is None
