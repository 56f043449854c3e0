"""A disk client-state store as one checkpoint sees it: base and segments.

The states of the checkpoint of round t are the base files (the round b of
`base.bin`) with the segments of the checkpoints in (b, t] laid over them,
newest first. Each segment's index names the checkpoint before it
(`previous`), so version t's chain is read back from `segment_<t>` to b.
Nothing here writes: `problem` verifies what a resume from t needs before
the store is opened (and changed) for it, so a damaged segment makes version
t damaged while an older version can still be tried (docs/design.md sec.
5.3.1 and 5.5).

Every row has a CRC-32 (over its leaves in order): a segment's index holds
those of its rows, `base.bin` those of the base rows it vouches for. A row a
client got its first state in is written in place in the base file (slot -1
in the index) and vouched for by that segment until a merge.
"""

import dataclasses
import os
import zlib
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from tff_fedwin.training import client_state_spec
from tff_fedwin.training import disk_store_layout as layout
from tff_fedwin.training import row_files

IN_BASE = -1  # A segment slot: the row is in place in the base file.


@dataclasses.dataclass(frozen=True)
class Base:
  """`base.bin`: the round the base files hold (None: fresh) and per row
  whether it holds a state (`created`, uint8) and its CRC-32 (uint32)."""

  round_num: Optional[int]
  created: np.ndarray
  crcs: np.ndarray


@dataclasses.dataclass(frozen=True)
class Segment:
  """The index of `segment_<t>`: entry i is row `rows[i]` in slot
  `slots[i]` (or `IN_BASE`) with CRC-32 `crcs[i]`; `previous` is the
  checkpoint before t in the store (None: the base of a fresh store)."""

  round_num: int
  previous: Optional[int]
  rows: np.ndarray
  slots: np.ndarray
  crcs: np.ndarray


def _round(value: np.ndarray) -> Optional[int]:
  value = int(value)
  return None if value == layout.NO_ROUND else value


def _encode(round_num: Optional[int]) -> np.ndarray:
  return np.int64(layout.NO_ROUND if round_num is None else round_num)


def write_base(directory: str, base: Base) -> None:
  layout.write_checked(
      os.path.join(directory, layout.BASE),
      {
          'round': _encode(base.round_num),
          'created': base.created,
          'crcs': base.crcs,
      },
  )


def read_base(directory: str) -> Base:
  """`base.bin`; DamagedClientStatesError if damaged."""
  arrays = layout.read_checked(os.path.join(directory, layout.BASE))
  try:
    return Base(_round(arrays['round']), arrays['created'], arrays['crcs'])
  except KeyError as e:
    raise client_state_spec.DamagedClientStatesError(
        f'{directory}/{layout.BASE} lacks {e}'
    ) from None


def write_index(segment_directory: str, segment: Segment) -> None:
  layout.write_checked(
      os.path.join(segment_directory, layout.INDEX),
      {
          'round': _encode(segment.round_num),
          'previous': _encode(segment.previous),
          'rows': segment.rows,
          'slots': segment.slots,
          'crcs': segment.crcs,
      },
  )


def read_segment(directory: str, round_num: int) -> Segment:
  """The index of `segment_<round_num>`.

  Raises:
    MissingClientStatesError: If the segment is missing.
    DamagedClientStatesError: If its index is damaged or of another round.
  """
  path = os.path.join(layout.segment_dir(directory, round_num), layout.INDEX)
  if not os.path.exists(path):
    raise client_state_spec.MissingClientStatesError(
        f'the client states of the checkpoint of round {round_num} are '
        f'missing: no {path}'
    )
  arrays = layout.read_checked(path)
  try:
    segment = Segment(
        _round(arrays['round']),
        _round(arrays['previous']),
        arrays['rows'],
        arrays['slots'],
        arrays['crcs'],
    )
  except KeyError as e:
    raise client_state_spec.DamagedClientStatesError(
        f'{path} lacks {e}'
    ) from None
  if segment.round_num != round_num:
    raise client_state_spec.DamagedClientStatesError(
        f'{path} is the index of round {segment.round_num}'
    )
  return segment


def chain(directory: str, base: Base, round_num: int) -> list[Segment]:
  """The segments of the checkpoints in (b, `round_num`], oldest first.

  Raises:
    ClientStatesError: If the base is newer than `round_num`, or the chain
      does not end at the base's round.
    MissingClientStatesError, DamagedClientStatesError: As `read_segment`.
  """
  if base.round_num is not None and base.round_num > round_num:
    raise client_state_spec.ClientStatesError(
        f'the client states in {directory} hold round {base.round_num}, '
        f'newer than the checkpoint of round {round_num}; they cannot be '
        'rolled back'
    )
  segments = []
  current = round_num
  while current != base.round_num:
    if current is None or (
        base.round_num is not None and current < base.round_num
    ):
      raise client_state_spec.DamagedClientStatesError(
          f'the segments of {directory} do not lead from round {round_num} '
          f'back to its base (round {base.round_num})'
      )
    segment = read_segment(directory, current)
    _check_entries(directory, segment, len(base.created))
    segments.append(segment)
    current = segment.previous
  return segments[::-1]


def _check_entries(directory: str, segment: Segment, num_clients: int):
  """DamagedClientStatesError unless every entry names a row of the
  population and a slot (or `IN_BASE`): an index with a valid CRC may still
  have been written wrong, and a negative offset is no read."""
  rows, slots = np.asarray(segment.rows), np.asarray(segment.slots)
  if rows.size and (rows.min() < 0 or rows.max() >= num_clients):
    raise client_state_spec.DamagedClientStatesError(
        f'the index of round {segment.round_num} in {directory} names a row '
        f'outside 0..{num_clients - 1}'
    )
  if slots.size and slots.min() < IN_BASE:
    raise client_state_spec.DamagedClientStatesError(
        f'the index of round {segment.round_num} in {directory} names a '
        f'negative slot ({int(slots.min())})'
    )


def newest_entries(
    segments: Sequence[Segment],
) -> dict[int, tuple[int, int, int]]:
  """row -> (segment round, slot, CRC-32) of its newest entry."""
  where = {}
  for segment in segments:
    for row, slot, crc in zip(
        segment.rows.tolist(), segment.slots.tolist(), segment.crcs.tolist()
    ):
      where[row] = (segment.round_num, slot, crc)
  return where


def row_crc(leaves: Sequence[np.ndarray]) -> int:
  """The CRC-32 of a row: over its leaves' bytes, in order."""
  crc = 0
  for leaf in leaves:
    crc = zlib.crc32(row_files.byte_view(np.ascontiguousarray(leaf)), crc)
  return crc


def _read_crc(directory: str, row_bytes: Sequence[int], index: int) -> int:
  """CRC-32 of row/slot `index` of the leaf files in `directory`."""
  crc = 0
  for j, nbytes in enumerate(row_bytes):
    with open(layout.leaf_file(directory, j), 'rb') as f:
      data = os.pread(f.fileno(), nbytes, index * nbytes)
    if len(data) != nbytes:
      raise client_state_spec.DamagedClientStatesError(
          f'{layout.leaf_file(directory, j)} is truncated before entry {index}'
      )
    crc = zlib.crc32(data, crc)
  return crc


def problem(
    directory: str, round_num: int, listed: Mapping[str, tuple[int, int]]
) -> Optional[str]:
  """None if the store holds version `round_num`'s states intact.

  Checks the files `listed` (name in `directory` -> (size, CRC-32); a
  segment index merged into the base since counts as there), `base.bin`,
  the chain of segments back to the base, and the CRC-32 of every row the
  chain holds. Rows only the base holds are checked when they are read
  (`DiskClientStateStore.get`): every version shares them.

  Raises:
    ClientStatesError: If the store is of another format (not damage: a
      store written by an older tff_fedwin).
  """
  try:
    layout.check_format(directory)
  except client_state_spec.ClientStatesError:
    raise
  except (FileNotFoundError, ValueError) as e:
    return f'its client-state manifest cannot be read ({e})'
  try:
    base = read_base(directory)
    for name, (size, crc) in sorted(listed.items()):
      path = os.path.join(directory, name)
      merged = name.startswith('segment_') and base.round_num == round_num
      if not os.path.isfile(path):
        if merged:
          continue
        return f'missing file {path}'
      if os.path.getsize(path) != size:
        return f'truncated or resized file {path}'
      with open(path, 'rb') as f:
        if zlib.crc32(f.read()) != crc:
          return f'checksum mismatch of {path}'
    num_clients = len(base.created)
    row_bytes = [
        os.path.getsize(layout.leaf_file(directory, j)) // max(num_clients, 1)
        for j in range(_num_leaves(directory))
    ]
    for row, (segment, slot, crc) in sorted(
        newest_entries(chain(directory, base, round_num)).items()
    ):
      source = layout.segment_dir(directory, segment)
      if slot == IN_BASE:
        source, slot = directory, row
      if _read_crc(source, row_bytes, slot) != crc:
        return (
            f'the client state of row {row} in {source} does not match its '
            f'CRC-32 (segment of round {segment})'
        )
  except FileNotFoundError as e:
    return f'its client states are missing ({e})'
  except client_state_spec.ClientStatesError as e:
    return f'its client states cannot be restored ({e})'
  return None


def _num_leaves(directory: str) -> int:
  count = 0
  while os.path.exists(layout.leaf_file(directory, count)):
    count += 1
  return count
