"""What a disk client-state store's files would be after a rollback, unwritten.

A resume from version t rolls the store back to round t
(`DiskClientStateStore.restore`: the undo logs of later versions applied,
newest first, then the deltas up to t). That writes the base files and
deletes undo logs, so it must not happen before version t is known to be
intact: `rolled_back_checksums` computes the (size, CRC-32) each store file
would have after that rollback, reading the base files, undo logs and deltas
without writing anything, and the resume compares them with version t's
manifest first (`checkpoints.Checkpoints.resume`). A damaged base file, undo
log or delta makes version t's checksums differ; the version then counts as
damaged and the store is untouched (docs/design.md sec. 5.5).

A row's value after the rollback is, in order of precedence: the row of the
oldest undo log after t that holds it (undo logs put back the base before
their round's delta; applied newest first, the oldest wins), else the row of
the newest delta in (applied, t] that holds it, else the base file's row.
"""

import json
import os
import zlib
from collections.abc import Mapping
from typing import Optional

import numpy as np

from tff_fedwin.training import client_state_spec
from tff_fedwin.training import disk_store_layout as layout

_CHUNK_BYTES = 1 << 22


def _sources(
    directory: str, round_num: int
) -> tuple[dict[int, tuple[str, int]], dict[int, int]]:
  """row -> (directory, slot) whose leaf files hold its value; row -> created.

  Raises:
    client_state_spec.ClientStatesError: If the store cannot reach round `round_num`.
  """
  applied = layout.read_json(os.path.join(directory, layout.APPLIED))['round']
  source, created = {}, {}
  undos = [u for u in layout.undo_rounds(directory) if u > round_num]
  for undo in reversed(undos):  # Newest first: an older one overrides.
    path = layout.undo_dir(directory, undo)
    rows = np.load(os.path.join(path, layout.ROWS)).tolist()
    flags = np.load(os.path.join(path, layout.CREATED_ROWS)).tolist()
    for slot, (row, flag) in enumerate(zip(rows, flags)):
      source[row], created[row] = (path, slot), int(flag)
    applied = layout.read_json(os.path.join(path, layout.PREVIOUS))['round']
  if applied is not None and applied > round_num:
    raise client_state_spec.ClientStatesError(
        f'the client states in {directory} are those of round {applied} and '
        f'no undo log goes back to round {round_num}'
    )
  for delta in layout.delta_rounds(directory):
    if (applied is None or delta > applied) and delta <= round_num:
      path = layout.delta_dir(directory, delta)
      for slot, row in enumerate(np.load(os.path.join(path, layout.ROWS))):
        source[int(row)], created[int(row)] = (path, slot), 1
      applied = delta
  if applied != round_num:
    raise client_state_spec.ClientStatesError(
        f'the client states of round {round_num} are missing in {directory} '
        f'(it holds those of round {applied})'
    )
  return source, created


def _leaf_checksum(
    path: str,
    leaf_index: int,
    row_bytes: int,
    source: Mapping[int, tuple[str, int]],
) -> tuple[int, int]:
  """(size, CRC-32) of a base leaf file with the `source` rows in place."""
  size, crc = os.path.getsize(path), 0
  rows_per_chunk = max(1, _CHUNK_BYTES // max(row_bytes, 1))
  origins = {}  # directory -> its open leaf file
  try:
    with open(path, 'rb') as f:
      first = 0
      while chunk := f.read(rows_per_chunk * row_bytes):
        data = bytearray(chunk)
        for row in range(first, first + len(chunk) // max(row_bytes, 1)):
          if row not in source:
            continue
          origin, slot = source[row]
          if origin not in origins:
            origins[origin] = open(layout.leaf_file(origin, leaf_index), 'rb')
          value = os.pread(
              origins[origin].fileno(), row_bytes, slot * row_bytes
          )
          if len(value) != row_bytes:
            raise client_state_spec.ClientStatesError(
                f'{origin}: leaf {leaf_index} is short'
            )
          offset = (row - first) * row_bytes
          data[offset : offset + row_bytes] = value
        crc = zlib.crc32(data, crc)
        first += rows_per_chunk
  finally:
    for opened in origins.values():
      opened.close()
  return size, crc


def rolled_back_checksums(
    directory: str, round_num: int
) -> dict[str, tuple[int, int]]:
  """Each store file's (size, CRC-32) after a rollback to `round_num`.

  The files `DiskClientStateStore.checkpoint_files` lists (manifest,
  applied round, created flags, leaf files), by absolute path; nothing is
  written.

  Raises:
    client_state_spec.ClientStatesError: If the store cannot reach `round_num`, or an undo log
      or delta is short.
    OSError, ValueError: If a file is missing or does not parse.
  """
  directory = os.path.abspath(directory)
  created_path = os.path.join(directory, layout.CREATED)
  num_clients = os.path.getsize(created_path)
  source, created = _sources(directory, round_num)
  flags = bytearray(np.fromfile(created_path, np.uint8).tobytes())
  for row, flag in created.items():
    flags[row] = flag
  applied = json.dumps({'round': round_num}).encode()  # `layout.write_json`.
  sums = {
      created_path: (len(flags), zlib.crc32(flags)),
      os.path.join(directory, layout.APPLIED): (
          len(applied),
          zlib.crc32(applied),
      ),
  }
  manifest = os.path.join(directory, layout.MANIFEST)
  with open(manifest, 'rb') as f:
    content = f.read()
  sums[manifest] = (len(content), zlib.crc32(content))
  leaf_index = 0
  while os.path.exists(path := layout.leaf_file(directory, leaf_index)):
    row_bytes = os.path.getsize(path) // max(num_clients, 1)
    sums[path] = _leaf_checksum(path, leaf_index, row_bytes, source)
    leaf_index += 1
  return sums


def problem(
    directory: str, round_num: int, listed: Mapping[str, tuple[int, int]]
) -> Optional[str]:
  """None if the rolled-back files would be as `listed` (abs path -> pair)."""
  # Damage: a file missing or not parsing (ClientStatesError is a
  # ValueError); any other OSError (EIO, EMFILE) is raised, as no damage.
  try:
    sums = rolled_back_checksums(directory, round_num)
  except (FileNotFoundError, ValueError, KeyError) as e:
    return f'its client states cannot be rolled back ({e})'
  for path, expected in sorted(listed.items()):
    if path not in sums:
      return f'missing file {path}'
    if tuple(sums[path]) != tuple(expected):
      return (
          f'the client-state file {path} would not be as listed after the '
          'rollback (a damaged base file, undo log or delta)'
      )
  return None
