"""The files of a `DiskClientStateStore` directory, its lock and its manifest.

manifest.json      format, template, population digest, owner
applied.json       {"round": t}: the checkpoint the base files hold
created.bin        uint8 [num_clients]: 1 once a client's row is written
leaf_<j>.bin       leaf j of every client, [num_clients, *shape], sparse
pending/           rows updated since the last checkpoint (slots)
delta_<t>/         pending/ of the checkpoint of round t, + rows.npy
undo_<t>/          the base rows delta_<t> replaced, + rows.npy, created.npy
                   and previous.json: rolls the base back to the checkpoint
                   before t (kept for every kept version but the oldest)
.lock              flock while a store is open
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from typing import Any

from tff_fedwin.training import client_state_spec
from tff_fedwin.training import client_states as client_states_lib

FORMAT_VERSION = 1
MANIFEST = 'manifest.json'
APPLIED = 'applied.json'
CREATED = 'created.bin'
LOCK = '.lock'
PENDING = 'pending'
ROWS = 'rows.npy'
_LEAF_PATTERN = re.compile(r'^leaf_\d+\.bin$')
DELTA_PATTERN = re.compile(r'^delta_(\d+)$')
UNDO_PATTERN = re.compile(r'^undo_(\d+)(\.tmp)?$')
CREATED_ROWS = 'created.npy'
PREVIOUS = 'previous.json'


def leaf_file(directory: str, leaf_index: int) -> str:
  return os.path.join(directory, f'leaf_{leaf_index}.bin')


def delta_dir(directory: str, round_num: int) -> str:
  return os.path.join(directory, f'delta_{round_num}')


def is_store_entry(name: str) -> bool:
  return bool(
      name in (MANIFEST, APPLIED, CREATED, LOCK, PENDING)
      or _LEAF_PATTERN.match(name)
      or DELTA_PATTERN.match(name)
      or UNDO_PATTERN.match(name)
      # atomic_write's temporary files.
      or name.startswith(('.' + MANIFEST, '.' + APPLIED))
  )


def undo_dir(directory: str, round_num: int) -> str:
  return os.path.join(directory, f'undo_{round_num}')


def undo_rounds(directory: str) -> list[int]:
  """The rounds of the complete `undo_<t>` directories, ascending."""
  return sorted(
      int(m.group(1))
      for m in map(UNDO_PATTERN.match, os.listdir(directory))
      if m and not m.group(2)
  )


def remove_incomplete_undos(directory: str) -> None:
  for name in os.listdir(directory):
    match = UNDO_PATTERN.match(name)
    if match and match.group(2):
      shutil.rmtree(os.path.join(directory, name))


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


def delta_rounds(directory: str) -> list[int]:
  """The rounds of the `delta_<t>` directories, ascending."""
  return sorted(
      int(m.group(1))
      for m in map(DELTA_PATTERN.match, os.listdir(directory))
      if m
  )
