"""A round's row writes on a thread of their own, beside the next TFF call.

`DiskClientStateStore.update` hands its rows to `RowWrites.submit` and
returns: the `pwrite`s and CRC-32s of the round's states (most of the
store's work in a round: `pwrite` 462 ms of 546 at 50 EMNIST-CNN clients,
docs/performance.md) run while the driver waits for the next round's TFF
call. At most one batch is in flight: the next `submit`, and the store's
checkpoint and `close`, first `join` it, which re-raises its error (e.g. a
full disk) there. Until then the batch's states are read from memory
(`in_flight`). Nothing durable changes: a checkpoint joins before it syncs,
and a state not yet in a checkpoint is unread on resume (docs/design.md
sec. 5.5).
"""

import concurrent.futures
from collections.abc import Sequence
from typing import Optional

from absl import logging
import numpy as np

from tff_fedwin.training import disk_store_chain as chain_lib
from tff_fedwin.training import row_files

# One row write: (store row, the leaf files, the row or slot in them, leaves).
Write = tuple[int, Sequence[int], int, Sequence[np.ndarray]]


def write_row(
    fds: Sequence[int], index: int, leaves: Sequence[np.ndarray]
) -> None:
  """Writes a state's leaves at row `index` of their files (one per leaf)."""
  for fd, leaf in zip(fds, leaves):
    row_files.pwrite(fd, leaf, index * leaf.nbytes)


def _write_all(writes: Sequence[Write]) -> dict[int, int]:
  """Writes each state; returns store row -> the state's CRC-32."""
  crcs = {}
  for row, fds, index, leaves in writes:
    write_row(fds, index, leaves)
    crcs[row] = chain_lib.row_crc(leaves)
  return crcs


class RowWrites:
  """One batch of row writes at a time, on one background thread."""

  def __init__(self, name: str):
    self._name = name
    self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
    self._future: Optional[concurrent.futures.Future] = None
    self._in_flight: dict[int, Sequence[np.ndarray]] = {}
    self._error: Optional[BaseException] = None

  def submit(self, writes: Sequence[Write]) -> None:
    """Starts `writes` after joining the batch before (its rows distinct).

    The leaves are written as they are, not copied: the caller leaves them
    unchanged until the next `join`.
    """
    self.check()
    if self._future is not None:
      raise ValueError('`join` the batch in flight before the next `submit`.')
    if self._executor is None:
      self._executor = concurrent.futures.ThreadPoolExecutor(
          max_workers=1, thread_name_prefix=self._name
      )
    self._in_flight = {row: leaves for row, _, _, leaves in writes}
    self._future = self._executor.submit(_write_all, list(writes))

  def in_flight(self, row: int) -> Optional[Sequence[np.ndarray]]:
    """The leaves of `row` if the batch in flight writes it, else None."""
    return self._in_flight.get(row)

  def join(self) -> dict[int, int]:
    """Waits for the batch in flight: its rows' CRC-32s (none in flight: {}).

    Raises:
      Exception: The error of a failed batch, now and at every later call.
    """
    self.check()
    future, self._future = self._future, None
    if future is None:
      return {}
    try:
      return future.result()
    except BaseException as e:
      self._error = e
      raise
    finally:
      self._in_flight = {}

  def close(self) -> None:
    """Waits for the batch in flight; an error no `join` raised is logged.

    Its states were not in a checkpoint yet, so a resume does not read
    them: the run that closes the store (e.g. after another error) loses
    nothing by it.
    """
    future, self._future, self._in_flight = self._future, None, {}
    if future is not None and future.exception() is not None:
      logging.warning(
          'Client-state writes after the last checkpoint failed (%s); a '
          'resume does not read them.',
          future.exception(),
      )
    if self._executor is not None:
      self._executor.shutdown(wait=True)
      self._executor = None

  def check(self) -> None:
    """Raises if a batch failed: nothing can be written after it."""
    if self._error is not None:
      raise ValueError(
          'An earlier write of client states failed; the store takes no '
          f'more updates: {self._error}'
      ) from self._error
