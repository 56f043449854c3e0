"""Client states in files: RAM bounded by two rounds, checkpoints by the changes.

`DiskClientStateStore`: sparse per-leaf array files moved with `pread`/`pwrite`
(not `np.memmap`), each state written once (first in its base row, later into
`pending/`, renamed `segment_<t>/` at a checkpoint), segments merged into the
base files now and then. Layout, kill points and measurements: docs/design.md
sec. 5.5; the chain of segments: `disk_store_chain`.
"""

import os
import shutil
from collections.abc import Collection, Sequence
from typing import Any, Optional

from absl import logging
import numpy as np

from tff_fedwin.training import client_state_spec
from tff_fedwin.training import disk_store_chain as chain_lib
from tff_fedwin.training import disk_store_layout as layout
from tff_fedwin.training import row_files
from tff_fedwin.training import row_writes
from tff_fedwin.training import set_aside

_IN_BASE = chain_lib.IN_BASE
# Segments merge into the base once they hold more than MERGE_AT x population
# states: the disk holds at most about 1 + MERGE_AT x the population's states
# (plus one interval's), and each state is written about 1 + (the share of
# the merged slots still newest) times (docs/design.md sec. 5.5).
MERGE_AT = 1.0
# ... or once there are more segments than this (a checkpoint every round
# with few clients makes many small ones).
MAX_SEGMENTS = 64


class DiskClientStateStore:
  """Client states in sparse per-leaf array files, checkpointed incrementally.

  Row i of every leaf file is client i of the fixed population `client_ids`;
  a client never updated reads as a copy of `template`. `get` and `update`
  touch only the given clients' rows; `update` returns once its writes have
  started (`row_writes`). A checkpoint of round t is `prepare_checkpoint(t)`,
  the program state, then `finish_checkpoint(t)`; `restore(...,
  round_num=t)` gives its states (docs/design.md sec. 5.5).
  """

  def __init__(
      self,
      directory: str,
      template: Any,
      client_ids: Sequence[str],
      *,
      owner: str,
  ):
    """Use `create` or `restore`; this only checks the arguments."""
    self._spec = client_state_spec.StateSpec(template)
    ids = client_state_spec.check_client_ids(client_ids, allow_duplicates=False)
    if not ids:
      raise ValueError('`client_ids` must not be empty.')
    self._rows = {client_id: i for i, client_id in enumerate(ids)}
    self._ids_digest = layout.ids_digest(ids)
    self.directory = os.path.abspath(os.fspath(directory))
    self._owner = str(owner)
    self._leaf_bytes = [leaf.nbytes for leaf in self._spec.leaves]
    self._lock_fd: Optional[int] = None
    self._base_fds: list[int] = []
    self._base = chain_lib.Base(
        None, np.zeros(len(ids), np.uint8), np.zeros(len(ids), np.uint32)
    )
    # The chain over the base: row -> (segment round, slot, CRC-32) of its
    # newest entry; segment round -> its number of slots.
    self._where: dict[int, tuple[int, int, int]] = {}
    self._segment_slots: dict[int, int] = {}
    self._pending_fds: Optional[list[int]] = None
    # row -> (slot, CRC-32; None while `_writes` writes it).
    self._pending: dict[int, tuple[int, Optional[int]]] = {}
    self._writes = row_writes.RowWrites('client-state-writes')
    self._num_pending_slots = 0
    self._prepared: Optional[int] = None

  @property
  def num_clients(self) -> int:
    """The size of the population."""
    return len(self._rows)

  @classmethod
  def create(
      cls,
      directory: str,
      template: Any,
      client_ids: Sequence[str],
      *,
      owner: str,
      run_dir: Optional[str] = None,
  ) -> 'DiskClientStateStore':
    """A new store with every client at `template`, replacing an old one.

    Args:
      directory: Created (0700) if missing. A store of the same `owner`
        already there is replaced; another owner's store or any other file
        in it is an error.
      template: The initial state of every client (nested numpy arrays).
      client_ids: The population, distinct str ids in a fixed order.
      owner: Names the run the store belongs to (e.g. its checkpoint
        directory); `restore` refuses a store of another owner.
      run_dir: An old store holding states past round 0 is kept in its
        `damaged/` (`set_aside.keep_store`), never just deleted; default: the
        store directory's parent.

    Raises:
      ValueError: If an argument is invalid, `directory` holds other files,
        or another process has the store open.
    """
    store = cls(directory, template, client_ids, owner=owner)
    os.makedirs(store.directory, mode=0o700, exist_ok=True)
    store._lock_fd = layout.lock_directory(store.directory)
    try:
      layout.check_owner(store.directory, store._owner)
      kept = set_aside.keep_store(
          run_dir or os.path.dirname(store.directory), store.directory
      )
      if kept:
        logging.warning('Kept the replaced client states in %s.', kept)
      layout.remove_old_store(store.directory)
      layout.write_json(store._path(layout.MANIFEST), store._manifest())
      sizes = [n * store.num_clients for n in store._leaf_bytes]
      paths = [layout.leaf_file(store.directory, j) for j in range(len(sizes))]
      store._base_fds = row_files.open_leaf_files(paths, sizes)
      row_files.sync_and_close(store._base_fds, close=False)
      chain_lib.write_base(store.directory, store._base)
      row_files.fsync_path(store.directory)
    except BaseException:
      store.close()
      raise
    return store

  @classmethod
  def restore(
      cls,
      directory: str,
      template: Any,
      client_ids: Sequence[str],
      *,
      owner: str,
      round_num: int,
  ) -> 'DiskClientStateStore':
    """The store as of the checkpoint of round `round_num`.

    Drops the updates made after that checkpoint (pending slots and later
    segments); merged segments left by a killed merge are deleted.

    Raises:
      FileNotFoundError: If `directory` holds no store, or not the states of
        round `round_num`.
      ValueError: If the store was made for another template, population or
        owner, is of another format or merged past `round_num`, a file is
        damaged, or the store is open in another process.
    """
    path = os.path.join(os.fspath(directory), layout.MANIFEST)
    if not os.path.exists(path):
      raise client_state_spec.MissingClientStatesError(
          f'The client states of the checkpoint of round {round_num} are '
          f'missing: no client-state store in {directory}.'
      )
    store = cls(directory, template, client_ids, owner=owner)
    store._lock_fd = layout.lock_directory(store.directory)
    try:
      saved = layout.check_format(store.directory)
      store._spec.check_metadata(saved, store.directory)
      layout.check_population(saved, store._manifest(), store.directory)
      store._base_fds = row_files.open_leaf_files(
          [
              layout.leaf_file(store.directory, j)
              for j in range(len(store._leaf_bytes))
          ]
      )
      store._base = chain_lib.read_base(store.directory)
      segments = chain_lib.chain(store.directory, store._base, round_num)
      store._drop_all_but(segments)
      store._where = chain_lib.newest_entries(segments)
      store._segment_slots = {
          s.round_num: int(np.sum(s.slots != _IN_BASE)) for s in segments
      }
    except BaseException:
      store.close()
      raise
    return store

  def get(self, client_ids: Sequence[str]) -> list[Any]:
    """Copies of the states of `client_ids` (duplicates allowed), in order.

    Raises:
      DamagedClientStatesError: If a row read does not match its CRC-32.
    """
    client_ids = client_state_spec.check_client_ids(
        client_ids, allow_duplicates=True
    )
    self._check_usable()
    states = []
    for client_id, row in zip(client_ids, self._rows_of(client_ids)):
      in_flight = self._writes.in_flight(row)
      if in_flight is not None:
        states.append(
            self._spec.pack([np.array(a, copy=True) for a in in_flight])
        )
        continue
      if row in self._pending:
        (slot, crc), segment = self._pending[row], None
      elif row in self._where:
        segment, slot, crc = self._where[row]
      elif self._base.created[row]:
        segment, slot, crc = None, _IN_BASE, int(self._base.crcs[row])
      else:
        states.append(self._spec.new_state())
        continue
      leaves = self._read_entry(segment, slot, row)
      if chain_lib.row_crc(leaves) != crc:
        raise client_state_spec.DamagedClientStatesError(
            f'The client state of {client_id!r} in {self.directory} is '
            'damaged (CRC-32 mismatch); resume the run from an older '
            'checkpoint or restore the directory from a copy.'
        )
      states.append(self._spec.pack(leaves))
    return states

  def update(self, client_ids: Sequence[str], states: Sequence[Any]) -> None:
    """Replaces the states of distinct `client_ids`; all checked first.

    The states are written from the caller's arrays (no copy of the round's
    states) on the writes' thread: the caller leaves them unchanged.
    """
    client_ids, leaves = self._spec.checked_leaves_all(client_ids, states)
    rows = self._rows_of(client_ids)
    self._check_usable()
    self._join_writes()
    writes = []
    for row, state_leaves in zip(rows, leaves):
      slot = self._pending.get(row, (None, 0))[0]
      if slot is None and not self._has_state(row):
        slot = _IN_BASE  # No checkpoint reads this row yet: write in place.
      if slot == _IN_BASE:
        writes.append((row, self._base_fds, row, state_leaves))
      else:
        if slot is None:
          slot, self._num_pending_slots = (
              self._num_pending_slots,
              self._num_pending_slots + 1,
          )
        writes.append((row, self._open_pending(), slot, state_leaves))
      self._pending[row] = (slot, None)
    self._writes.submit(writes)

  def prepare_checkpoint(self, round_num: int) -> None:
    """Makes the updates since the last checkpoint durable as `segment_<t>/`.

    Call before saving the program state of round `round_num`, then
    `finish_checkpoint(round_num)`; `get` and `update` wait for it.
    """
    self._check_usable()
    self._join_writes()
    row_files.sync_and_close(self._open_pending(), close=True)
    row_files.sync_and_close(self._base_fds, close=False)
    entries = sorted(self._pending.items())
    chain_lib.write_index(
        self._path(layout.PENDING),
        chain_lib.Segment(
            round_num,
            self._head(),
            np.array([row for row, _ in entries], np.int64),
            np.array([slot for _, (slot, _) in entries], np.int64),
            np.array([crc for _, (_, crc) in entries], np.uint32),
        ),
    )
    os.rename(
        self._path(layout.PENDING),
        layout.segment_dir(self.directory, round_num),
    )
    row_files.fsync_path(self.directory)
    for row, (slot, crc) in entries:
      self._where[row] = (round_num, slot, crc)
    self._segment_slots[round_num] = self._num_pending_slots
    self._pending_fds, self._pending, self._num_pending_slots = None, {}, 0
    self._prepared = round_num

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int] = ()
  ) -> None:
    """Ends the checkpoint of round t, after its program state is saved.

    Merges the segments at or before the oldest kept nonzero version into
    the base files once the segments hold more states than the population
    or are more than `MAX_SEGMENTS` (`_merge`): every kept version still
    reads its states.

    Args:
      round_num: The round of the `prepare_checkpoint` call before.
      kept_rounds: The program states on disk (none given: only round t).
    """
    if self._prepared != round_num:
      raise ValueError(
          f'`finish_checkpoint({round_num})` without '
          f'`prepare_checkpoint({round_num})` (prepared: {self._prepared}).'
      )
    self._prepared = None
    slots = sum(self._segment_slots.values())
    if (
        slots > MERGE_AT * self.num_clients
        or len(self._segment_slots) > MAX_SEGMENTS
    ):
      floor = min([k for k in kept_rounds if 0 < k < round_num] + [round_num])
      self._merge(floor)

  def checkpoint_files(self, round_num: int) -> dict[str, list[str]]:
    """The store's manifest and segment t's index (none for a fresh store)."""
    if round_num == 0:
      return {}
    index = os.path.join(
        layout.segment_dir(self.directory, round_num), layout.INDEX
    )
    return {'client_states': [self._path(layout.MANIFEST), index]}

  def close(self) -> None:
    """Waits for the writes, closes the files, releases the directory's lock."""
    self._writes.close()
    for fd in self._base_fds + (self._pending_fds or []):
      os.close(fd)
    if self._lock_fd is not None:
      os.close(self._lock_fd)  # Releases the flock.
    self._base_fds, self._pending_fds = [], None
    self._lock_fd = None

  def _path(self, name: str) -> str:
    return os.path.join(self.directory, name)

  def _head(self) -> Optional[int]:
    """The newest checkpoint the store holds (None: fresh)."""
    return max(self._segment_slots, default=self._base.round_num)

  def _has_state(self, row: int) -> bool:
    """Whether a checkpoint holds a state of `row` (a pending one aside)."""
    return bool(self._base.created[row]) or row in self._where

  def _join_writes(self) -> None:
    """Waits for the writes in flight and records their CRC-32s."""
    for row, crc in self._writes.join().items():
      self._pending[row] = (self._pending[row][0], crc)

  def _open_pending(self) -> list[int]:
    if self._pending_fds is None:
      pending = self._path(layout.PENDING)
      shutil.rmtree(pending, ignore_errors=True)
      os.makedirs(pending, mode=0o700)
      self._pending_fds = row_files.open_leaf_files(
          [layout.leaf_file(pending, j) for j in range(len(self._leaf_bytes))],
          [0] * len(self._leaf_bytes),
      )
    return self._pending_fds

  def _read_entry(
      self, segment: Optional[int], slot: int, row: int
  ) -> list[np.ndarray]:
    """The leaves of a state: `slot` of `segment` (None: of pending/), or the
    base row if `slot` is `_IN_BASE`. A segment's files are opened for the
    read only: a long run may hold many segments."""
    if slot == _IN_BASE:
      return self._read(self._base_fds, row)
    if segment is None:
      return self._read(self._pending_fds, slot)
    directory = layout.segment_dir(self.directory, segment)
    fds = row_files.open_leaf_files(
        [layout.leaf_file(directory, j) for j in range(len(self._leaf_bytes))]
    )
    try:
      return self._read(fds, slot)
    finally:
      for fd in fds:
        os.close(fd)

  def _drop_all_but(self, segments: Sequence[chain_lib.Segment]) -> None:
    """Deletes pending/ and every segment not in `segments` (the chain)."""
    shutil.rmtree(self._path(layout.PENDING), ignore_errors=True)
    keep = {segment.round_num for segment in segments}
    for segment in layout.segment_rounds(self.directory):
      if segment not in keep:
        shutil.rmtree(layout.segment_dir(self.directory, segment))
    row_files.fsync_path(self.directory)

  def _merge(self, floor: int) -> None:
    """Writes the newest state of each row of the segments <= `floor` into
    the base files, commits `base.bin` (round: the newest merged), then
    deletes those segments. A kill before the commit leaves the base rows
    it wrote unread: every kept version reads them from the segments."""
    merged = sorted(s for s in self._segment_slots if s <= floor)
    if not merged:
      return
    segments = [chain_lib.read_segment(self.directory, s) for s in merged]
    created, crcs = self._base.created.copy(), self._base.crcs.copy()
    for row, (segment, slot, crc) in chain_lib.newest_entries(segments).items():
      if slot != _IN_BASE:
        leaves = self._read_entry(segment, slot, row)
        row_writes.write_row(self._base_fds, row, leaves)
      created[row], crcs[row] = 1, crc
      if self._where.get(row, (None,))[0] == segment:
        del self._where[row]  # Its newest state is the base row now.
    row_files.sync_and_close(self._base_fds, close=False)
    self._base = chain_lib.Base(merged[-1], created, crcs)
    chain_lib.write_base(self.directory, self._base)
    for segment in merged:
      del self._segment_slots[segment]
      shutil.rmtree(layout.segment_dir(self.directory, segment))
    row_files.fsync_path(self.directory)

  def _manifest(self) -> dict[str, Any]:
    return {
        'format_version': layout.FORMAT_VERSION,
        'num_clients': self.num_clients,
        'client_ids_sha256': self._ids_digest,
        'owner': self._owner,
        **self._spec.metadata(),
    }

  def _check_usable(self) -> None:
    self._writes.check()
    if self._lock_fd is None:
      raise ValueError(f'The client-state store in {self.directory} is closed.')
    if self._prepared is not None:
      raise ValueError(
          f'`finish_checkpoint({self._prepared})` must come before the next '
          '`get` or `update`.'
      )

  def _rows_of(self, client_ids: Sequence[str]) -> list[int]:
    rows = []
    for client_id in client_ids:
      row = self._rows.get(client_id)
      if row is None:
        raise ValueError(
            f'Client id {client_id!r} is not in the population of the '
            f'client-state store in {self.directory} '
            f'({self.num_clients} clients).'
        )
      rows.append(row)
    return rows

  def _read(self, fds: Sequence[int], index: int) -> list[np.ndarray]:
    return [
        row_files.pread(fd, leaf, index * nbytes)
        for fd, leaf, nbytes in zip(fds, self._spec.leaves, self._leaf_bytes)
    ]
