"""Manifests of checkpoint versions: what makes a version intact.

`program_state_<t>/fedwin_manifest.json`, written last and atomically, lists
every file version t needs with its size and CRC-32 (`files`, and a disk
store's `client_states`, checked with their chain of segments by
`disk_store_chain.problem`), a digest of the metrics.csv rows 1..t and, if
any, per_client_metrics.csv's size and CRC-32 (`per_client_csv`). A version
is intact when all of them check (docs/design.md sec. 5.3.1).
"""

import json
import os
import re
import shutil
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from absl import logging

from tff_fedwin.training import client_states as client_states_lib
from tff_fedwin.training import disk_store_chain
from tff_fedwin.training import metrics_rows
from tff_fedwin.training import per_client_csv as per_client_csv_lib
from tff_fedwin.training import row_files
from tff_fedwin.training import set_aside

MANIFEST = 'fedwin_manifest.json'
FORMAT_VERSION = 1
FILES = 'files'
CLIENT_STATES = 'client_states'
GROUPS = (FILES, CLIENT_STATES)
DAMAGED_DIR = set_aside.DAMAGED_DIR
_CHUNK = 1 << 22
_VERSION_DIR = re.compile(r'program_state_([0-9]+)')


def file_checksum(path: str) -> tuple[int, int]:
  """(size, CRC-32) of the file at `path`."""
  crc, size = 0, 0
  with open(path, 'rb') as f:
    while chunk := f.read(_CHUNK):
      crc = zlib.crc32(chunk, crc)
      size += len(chunk)
  return size, crc


def version_dir(checkpoint_dir: str, round_num: int) -> str:
  """The directory of program state version t (tff.program's default name)."""
  return os.path.join(checkpoint_dir, f'program_state_{round_num}')


def manifest_path(checkpoint_dir: str, round_num: int) -> str:
  return os.path.join(version_dir(checkpoint_dir, round_num), MANIFEST)


def has_manifest(checkpoint_dir: str, round_num: int) -> bool:
  return os.path.exists(manifest_path(checkpoint_dir, round_num))


def _version_files(directory: str) -> list[str]:
  paths = []
  for parent, _, names in os.walk(directory):
    paths.extend(os.path.join(parent, n) for n in names if n != MANIFEST)
  return sorted(paths)


def write(
    checkpoint_dir: str,
    round_num: int,
    groups: Mapping[str, Sequence[str]],
    metrics_csv: Optional[str],
    per_client_csv: Optional[str] = None,
) -> None:
  """Writes version t's manifest, last and atomically (fsync, rename).

  Writes the version's copy of metrics.csv's rows 1..t first
  (`metrics_rows.write_copy`). Every file it lists, metrics.csv and their
  directories are fsynced before it (`_make_durable`). With `per_client_csv`
  (per_client_metrics.csv), its size and CRC-32 now
  (`per_client_csv_lib.entry`, which fsyncs it).
  """
  metrics_rows.write_copy(
      metrics_csv, version_dir(checkpoint_dir, round_num), round_num
  )
  listed = {FILES: _version_files(version_dir(checkpoint_dir, round_num))}
  for group, paths in groups.items():
    listed.setdefault(group, []).extend(paths)
  manifest = {
      'format_version': FORMAT_VERSION,
      'round_num': round_num,
      'metrics_csv': metrics_rows.csv_digest(metrics_csv, round_num),
  }
  if per_client_csv is not None:
    manifest[per_client_csv_lib.MANIFEST_KEY] = per_client_csv_lib.entry(
        per_client_csv
    )
  for group in GROUPS:
    paths = listed.get(group, ())
    # The disk store's files relative to its directory (their common one):
    # the run's `client_states_dir`, maybe outside the checkpoint directory.
    root = (
        os.path.commonpath([os.path.dirname(p) for p in paths])
        if group == CLIENT_STATES and paths
        else checkpoint_dir
    )
    manifest[group] = {
        os.path.relpath(path, root): list(file_checksum(path)) for path in paths
    }
  rows = [metrics_csv] if metrics_csv and os.path.exists(metrics_csv) else []
  _make_durable(
      [path for group in GROUPS for path in listed.get(group, ())] + rows,
      checkpoint_dir,
  )
  client_states_lib.atomic_write(
      manifest_path(checkpoint_dir, round_num),
      lambda f: f.write(json.dumps(manifest, indent=1, sort_keys=True)),
      binary=False,
  )


def _make_durable(paths: Sequence[str], checkpoint_dir: str) -> None:
  """fsyncs every file the manifest vouches for, then their directories.

  TFF's program-state files (and any other writer's) may still be in the
  page cache: a manifest durable before them would vouch, after a power
  loss, for files that read as damaged. The directories: each file's parent
  and, inside `checkpoint_dir`, every directory up to it (the renames that
  made the version's directories).
  """
  top = os.path.abspath(checkpoint_dir)
  directories = {top}
  for path in paths:
    row_files.fsync_path(path)
    parent = os.path.dirname(os.path.abspath(path))
    directories.add(parent)
    while parent.startswith(top + os.sep):
      parent = os.path.dirname(parent)
      directories.add(parent)
  for directory in sorted(directories, reverse=True):  # Deepest first.
    row_files.fsync_path(directory)


def read(checkpoint_dir: str, round_num: int) -> tuple[Any, Optional[str]]:
  """(manifest, None), or (None, why it cannot be used).

  A manifest that parses but is malformed (an entry that is no (size, CRC)
  pair, a path outside the checkpoint directory, no metrics digest) cannot be
  used either: its version counts as damaged, as one that does not parse.
  """
  path = manifest_path(checkpoint_dir, round_num)
  if not os.path.exists(path):
    return None, f'no manifest ({MANIFEST}): the checkpoint is incomplete'
  try:
    with open(path) as f:
      manifest = json.load(f)
    if manifest.get('format_version') != FORMAT_VERSION:
      return None, f'manifest {path} has another format version'
    if manifest.get('round_num') != round_num:
      return None, f'manifest {path} is of another round'
    malformed = _malformed(manifest)
  except (OSError, ValueError, AttributeError) as e:
    return None, f'manifest {path} cannot be read ({e})'
  if malformed:
    return None, f'manifest {path} is malformed: {malformed}'
  return manifest, None


def _is_count(value: Any, limit: Optional[int] = None) -> bool:
  """A JSON integer >= 0 (and < `limit`); not a bool, which is an int too."""
  return (
      isinstance(value, int)
      and not isinstance(value, bool)
      and value >= 0
      and (limit is None or value < limit)
  )


def _is_size_and_crc(listed: Any) -> bool:
  return (
      isinstance(listed, list)
      and len(listed) == 2
      and _is_count(listed[0])
      and _is_count(listed[1], 1 << 32)
  )


def _malformed(manifest: Mapping[str, Any]) -> Optional[str]:
  """What makes a parsed manifest unusable, or None."""
  for group in GROUPS:
    entries = manifest.get(group)
    if not isinstance(entries, dict):
      return f'no {group!r} list'
    for relative, listed in entries.items():
      # Relative, and inside the checkpoint directory: a manifest never
      # makes a resume read (or vouch for) a file elsewhere.
      normalized = os.path.normpath(relative)
      if os.path.isabs(normalized) or normalized.split(os.sep)[0] == '..':
        return f'{group} entry {relative!r} is outside the checkpoint directory'
      if not _is_size_and_crc(listed):
        return f'{group} entry {relative!r} is not a (size, CRC-32) pair'
  per_client = manifest.get(per_client_csv_lib.MANIFEST_KEY, [0, 0])
  if not _is_size_and_crc(per_client):
    return f'{per_client_csv_lib.MANIFEST_KEY} is not a (size, CRC-32) pair'
  digest = manifest.get('metrics_csv')
  if not (
      isinstance(digest, dict)
      and _is_count(digest.get('rows'))
      and _is_count(digest.get('crc32'), 1 << 32)
  ):
    return 'no metrics.csv digest (rows, CRC-32)'
  return None


def check_group(
    checkpoint_dir: str, manifest: Any, group: str
) -> Optional[str]:
  """None if every file of `group` is as listed, else what is wrong."""
  for relative, (size, crc) in sorted(manifest[group].items()):
    path = os.path.normpath(os.path.join(checkpoint_dir, relative))
    if not os.path.isfile(path):
      return f'missing file {path}'
    actual_size = os.path.getsize(path)
    if actual_size != size:
      return (
          f'truncated or resized file {path} ({actual_size} bytes, {size} '
          'listed)'
      )
    if file_checksum(path)[1] != crc:
      return f'checksum mismatch of {path}'
  return None


def check_version(
    checkpoint_dir: str, round_num: int
) -> tuple[Any, Optional[str]]:
  """(manifest, None) if version t's manifest is usable and its files are as
  listed (`read`, `check_group` of `FILES`), else (None, what is wrong)."""
  manifest, problem = read(checkpoint_dir, round_num)
  problem = problem or check_group(checkpoint_dir, manifest, FILES)
  return (None, problem) if problem else (manifest, None)


def check_store(manifest: Any, round_num: int, store_dir: str) -> Optional[str]:
  """None if the disk store in `store_dir` holds version t's states intact.

  Reads, never writes (`disk_store_chain.problem`); a version without a
  disk store (no `client_states` entries) passes.

  Raises:
    ClientStatesError: If the store is of another format.
  """
  listed = {
      os.path.normpath(entry): tuple(pair)
      for entry, pair in manifest[CLIENT_STATES].items()
  }
  if not listed:
    return None
  if any(n.startswith(os.pardir) or os.path.isabs(n) for n in listed):
    return f'its {CLIENT_STATES} entries leave the store directory'
  return disk_store_chain.problem(os.path.abspath(store_dir), round_num, listed)


def version_rounds(checkpoint_dir: str) -> list[int]:
  """The rounds of the version directories (`program_state_<t>`), ascending."""
  try:
    names = os.listdir(checkpoint_dir)
  except FileNotFoundError:
    return []
  return sorted(
      int(m.group(1)) for m in map(_VERSION_DIR.fullmatch, names) if m
  )


def resume_round(checkpoint_dir: str) -> Optional[int]:
  """The round a rerun resumes from, or None (it starts from round 1).

  The one answer every message gives (a full disk, a lost worker): the
  newest version whose manifest is usable and whose listed files check, as
  the resume walks them; versions older than the oldest with a manifest
  (legacy) by their directory alone. The rows files are no reason to fall
  back (`Checkpoints.resume` restores or refuses them); the disk store's
  files and the program state's load are checked by the resume itself,
  which may fall back further.
  """
  rounds = version_rounds(checkpoint_dir)
  verified = [t for t in rounds if has_manifest(checkpoint_dir, t)]
  for round_num in reversed(rounds):
    if verified and round_num >= min(verified):
      if check_version(checkpoint_dir, round_num)[1]:
        continue
    return round_num
  return None


def listed_bytes(manifest: Any, store_dir: Optional[str] = None) -> int:
  """Bytes of the files the manifest lists, and with `store_dir` of the disk
  store's segments they name (their states are vouched for by the index)."""
  total = sum(size for group in GROUPS for size, _ in manifest[group].values())
  for entry in manifest[CLIENT_STATES] if store_dir else ():
    segment = os.path.join(store_dir, os.path.dirname(entry))
    if os.path.dirname(entry) and os.path.isdir(segment):
      total += sum(
          os.path.getsize(os.path.join(segment, name))
          for name in os.listdir(segment)
          if name != os.path.basename(entry)
      )
  return total


def move_aside(checkpoint_dir: str, round_num: int) -> str:
  """Moves version t to `<run dir>/damaged/program_state_<t>-<time>`."""
  source = version_dir(checkpoint_dir, round_num)
  run_dir = os.path.dirname(os.path.abspath(checkpoint_dir))
  target = set_aside.target(run_dir, os.path.basename(source))
  shutil.move(source, target)
  return target


def set_aside_versions(
    checkpoint_dir: str,
    store_dir: str,
    problems: Sequence[tuple[int, str]],
    round_num: int,
) -> None:
  """Moves the versions `problems` (version, why) to `damaged/`, each with
  the files it lists outside its directory, and keeps the disk store's
  segments after round t (the resumed round); warns naming each."""
  run_dir = os.path.dirname(os.path.abspath(checkpoint_dir))
  for version, why in problems:
    manifest, _ = read(checkpoint_dir, version)
    target = move_aside(checkpoint_dir, version)
    if manifest is not None:
      set_aside.keep_outside_files(checkpoint_dir, manifest, target)
    logging.warning(
        'The checkpoint of round %d in %s is damaged or incomplete (%s); '
        'moved it to %s and resuming from an older one.',
        version,
        checkpoint_dir,
        why,
        target,
    )
  kept = (
      set_aside.keep_newer_segments(run_dir, store_dir, round_num)
      if problems
      else None
  )
  if kept:
    logging.warning(
        'Kept the client states of the rounds after %d in %s.', round_num, kept
    )
