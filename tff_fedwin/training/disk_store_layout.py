"""The files of a `DiskClientStateStore` directory, its lock and its manifest.

manifest.json      format, template, population digest, owner
base.bin           checked: the round b the base files hold, created flags and
                   each row's CRC-32 (written when segments are merged)
leaf_<j>.bin       leaf j of every client, [num_clients, *shape], sparse
pending/           the states updated since the last checkpoint (slots)
segment_<t>/       pending/ of the checkpoint of round t: its slots and a
                   checked index.bin (rows, slots, CRC-32s, previous round)
.lock              flock while a store is open

A *checked* file is an `np.savez` archive followed by the CRC-32 of its
bytes (4 bytes, little-endian): any damage is found when it is read.
"""

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import struct
import zipfile
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from tff_fedwin.training import client_state_spec
from tff_fedwin.training import client_states as client_states_lib

# 1: base files + deltas applied at each checkpoint + undo logs (until
# 2026-12-03); 2: base files + segments (sec. 5.5 of docs/design.md).
FORMAT_VERSION = 2
MANIFEST = 'manifest.json'
BASE = 'base.bin'
INDEX = 'index.bin'
LOCK = '.lock'
PENDING = 'pending'
NO_ROUND = -1  # `round`/`previous` in a checked file: none (a fresh store).
_LEAF_PATTERN = re.compile(r'^leaf_\d+\.bin$')
SEGMENT_PATTERN = re.compile(r'^segment_(\d+)$')


def leaf_file(directory: str, leaf_index: int) -> str:
  return os.path.join(directory, f'leaf_{leaf_index}.bin')


# A format-1 store's own entries: a fresh start replaces such a store too.
_FORMAT_1_ENTRY = re.compile(
    r'^(applied\.json|created\.bin|delta_\d+|undo_\d+(\.tmp)?|\.applied\.json.*)$'
)


def is_store_entry(name: str) -> bool:
  return bool(
      name in (MANIFEST, BASE, LOCK, PENDING)
      or _LEAF_PATTERN.match(name)
      or SEGMENT_PATTERN.match(name)
      or _FORMAT_1_ENTRY.match(name)
      # atomic_write's temporary files.
      or name.startswith(('.' + MANIFEST, '.' + BASE))
  )


def ids_digest(client_ids: Sequence[str]) -> str:
  digest = hashlib.sha256()
  for client_id in client_ids:
    digest.update(client_id.encode() + b'\0')
  return digest.hexdigest()


def write_json(path: str, value: Any) -> None:
  client_states_lib.atomic_write(
      path, lambda f: f.write(json.dumps(value)), binary=False
  )


def read_json(path: str) -> Any:
  with open(path) as f:
    return json.load(f)


def lock_directory(directory: str) -> int:
  """An fd holding an exclusive `flock` on the store in `directory`."""
  fd = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    os.close(fd)
    raise client_state_spec.ClientStatesError(
        f'The client-state directory {directory} is in use by another run '
        '(it is locked); use another directory.'
    ) from None
  return fd


def remove_old_store(directory: str) -> None:
  """Deletes a store's files (not its lock); ValueError if others are there."""
  names = os.listdir(directory)
  foreign = sorted(n for n in names if not is_store_entry(n))
  if foreign:
    raise client_state_spec.ClientStatesError(
        f'The client-state directory {directory} holds files that are not a '
        f"client-state store's: {foreign[:5]}; use an empty or new directory."
    )
  for name in names:
    path = os.path.join(directory, name)
    if name == LOCK:
      continue
    if os.path.isdir(path):
      shutil.rmtree(path)
    else:
      os.remove(path)


def segment_dir(directory: str, round_num: int) -> str:
  return os.path.join(directory, f'segment_{round_num}')


def segment_rounds(directory: str) -> list[int]:
  """The rounds of the `segment_<t>` directories, ascending."""
  return sorted(
      int(m.group(1))
      for m in map(SEGMENT_PATTERN.match, os.listdir(directory))
      if m
  )


def write_checked(path: str, arrays: dict[str, np.ndarray]) -> None:
  """Writes `arrays` (`np.savez`) + their CRC-32, atomically."""
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  payload = buffer.getvalue()
  client_states_lib.atomic_write(
      path,
      lambda f: f.write(payload + struct.pack('<I', zlib.crc32(payload))),
      binary=True,
  )


def read_checked(path: str) -> dict[str, np.ndarray]:
  """The arrays of a `write_checked` file.

  Raises:
    DamagedClientStatesError: If it is short, its CRC-32 does not match or
      it does not parse.
    FileNotFoundError: If it is missing.
  """
  with open(path, 'rb') as f:
    content = f.read()
  payload, trailer = content[:-4], content[-4:]
  if len(content) < 4 or struct.unpack('<I', trailer)[0] != zlib.crc32(payload):
    raise client_state_spec.DamagedClientStatesError(
        f'{path} is damaged (CRC-32 mismatch or truncated)'
    )
  try:
    with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
      return {name: archive[name] for name in archive.files}
  except (ValueError, OSError, zipfile.BadZipFile) as e:
    raise client_state_spec.DamagedClientStatesError(
        f'{path} does not parse ({e})'
    ) from None


def check_format(directory: str) -> dict[str, Any]:
  """The store's manifest; ClientStatesError if another format's.

  A store of format 1 (base files rewritten at every checkpoint, undo logs;
  tff_fedwin before 2026-12-03) is refused, not converted.
  """
  saved = read_json(os.path.join(directory, MANIFEST))
  if saved.get('format_version') != FORMAT_VERSION:
    raise client_state_spec.ClientStatesError(
        f'The client states in {directory} have format version '
        f'{saved.get("format_version")!r}, expected {FORMAT_VERSION} (format '
        '1 is that of tff_fedwin before 2026-12-03: finish that run with the '
        'version that started it, or start it again).'
    )
  return saved


def check_owner(directory: str, owner: str) -> None:
  """ClientStatesError if `directory` holds the store of another owner."""
  path = os.path.join(directory, MANIFEST)
  if not os.path.exists(path):
    return
  saved = read_json(path).get('owner')
  if saved != owner:
    raise client_state_spec.ClientStatesError(
        f'The client-state directory {directory} holds the states of '
        f'the run of {saved!r}, not {owner!r}; use another directory '
        '(or delete it if that run is over).'
    )


def check_population(
    saved: dict[str, Any], expected: dict[str, Any], directory: str
) -> None:
  """ClientStatesError unless `saved` has `expected`'s population, owner."""
  if (
      saved.get('num_clients') != expected['num_clients']
      or saved.get('client_ids_sha256') != expected['client_ids_sha256']
  ):
    raise client_state_spec.ClientStatesError(
        f'`client_ids` ({expected["num_clients"]} clients) are not the '
        f'population the client states in {directory} were made for '
        f'({saved.get("num_clients")} clients).'
    )
  if saved.get('owner') != expected['owner']:
    raise client_state_spec.ClientStatesError(
        f'The client states in {directory} belong to the run of '
        f'{saved.get("owner")!r}, not {expected["owner"]!r}.'
    )
