"""An async TFF context that runs another one on its own event-loop thread.

TFF's async remote contexts block inside their coroutines, so contexts sharing
one event loop run one after another; `ThreadedAsyncContext` gives each its own
thread so that several workers run in parallel (docs/runtime.md, 'Several
workers').
"""

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, Optional

import tensorflow_federated as tff

STOP_TIMEOUT_SECONDS = 10.0


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


class ConcurrencyRecorder:
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


class OrderedPhase:
  """Runs the invocations of one computation one at a time, in call order.

  The after-merge part of computations with CLIENTS-placed results: an
  `asyncio.Lock` (FIFO-fair) held during each invocation keeps the subrounds
  in subround order (docs/runtime.md, 'Several workers', "Client order").
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
      recorder: Optional[ConcurrencyRecorder] = None,
      ordering: Optional[OrderedPhase] = None,
  ):
    """Starts the loop thread.

    Args:
      context: The async context whose invocations run on the new thread.
      name: A label for the adapter and its thread.
      recorder: Optional in-flight counter shared by several adapters.
      ordering: Optional `OrderedPhase` shared by several adapters.
    """
    self._context = context
    self.name = name
    self._recorder = recorder or ConcurrencyRecorder()
    self._ordering = ordering or OrderedPhase()
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
      timeout_seconds: float = STOP_TIMEOUT_SECONDS,
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
