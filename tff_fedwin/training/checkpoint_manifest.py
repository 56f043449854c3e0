"""Manifests of checkpoint versions: what makes a version intact.

A checkpoint of round t is complete once `program_state_<t>/MANIFEST` exists:
written last (after the program state, the client states and the window's
models of round t), atomically, it lists every file the version needs with
its size and CRC-32, and a digest of the metrics.csv rows 1..t. A version is
*intact* when its manifest parses and every listed file has that size and
checksum (docs/design.md sec. 5.3). CRC-32 (zlib), not SHA-256: it detects
truncation, zero-filling and flipped bytes, and ran at 2.4 GB/s here against
SHA-256's 1.1 GB/s, which matters for large client-state files.

Two groups of files: `files` are checked as they are; `client_states` (a
disk client-state store: its manifest and the index of the segment round t
wrote) are checked with the chain of segments version t needs, before the
store is opened for it (`disk_store_chain.problem`). A run that
writes per_client_metrics.csv also lists its size and CRC-32: that file only
grows, so a resume checks its first bytes and cuts it back to them
(`per_client_csv`).
"""

import csv
import json
import os
import re
import shutil
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from tff_fedwin.training import client_states as client_states_lib
from tff_fedwin.training import disk_store_chain
from tff_fedwin.training import per_client_csv as per_client_csv_lib
from tff_fedwin.training import row_files

MANIFEST = 'fedwin_manifest.json'
FORMAT_VERSION = 1
FILES = 'files'
CLIENT_STATES = 'client_states'
GROUPS = (FILES, CLIENT_STATES)
DAMAGED_DIR = 'damaged'
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


def csv_digest(csv_path: Optional[str], round_num: int) -> dict[str, int]:
  """Rows 1..t of metrics.csv: their count and a CRC-32 of their values.

  Over the non-empty values of each row, not the file's bytes: the CSV is
  rewritten with more columns when eval columns first appear.
  """
  rows = []
  if csv_path is not None and os.path.exists(csv_path):
    with open(csv_path, newline='') as f:
      rows = [r for r in csv.DictReader(f) if int(r['round_num']) <= round_num]
  rows.sort(key=lambda row: int(row['round_num']))
  crc = 0
  for row in rows:
    items = sorted((k, v) for k, v in row.items() if v not in (None, ''))
    crc = zlib.crc32(json.dumps(items).encode(), crc)
  return {'rows': len(rows), 'crc32': crc}


def roll_back_csv(csv_path: Optional[str], round_num: int) -> None:
  """Drops the rows after round t from metrics.csv (atomically)."""
  if csv_path is None or not os.path.exists(csv_path):
    return
  with open(csv_path, newline='') as f:
    reader = csv.DictReader(f)
    fieldnames = list(reader.fieldnames or ['round_num'])
    rows = list(reader)
  kept = [row for row in rows if int(row['round_num']) <= round_num]
  if len(kept) == len(rows):
    return

  def write(f):
    writer = csv.DictWriter(f, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(kept)

  client_states_lib.atomic_write(csv_path, write, binary=False)


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

  Every file it lists, and their directories, are fsynced first
  (`_make_durable`). With `per_client_csv` (per_client_metrics.csv), its
  size and CRC-32 now (`per_client_csv_lib.entry`).
  """
  listed = {FILES: _version_files(version_dir(checkpoint_dir, round_num))}
  for group, paths in groups.items():
    listed.setdefault(group, []).extend(paths)
  manifest = {
      'format_version': FORMAT_VERSION,
      'round_num': round_num,
      'metrics_csv': csv_digest(metrics_csv, round_num),
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
  _make_durable(
      [path for group in GROUPS for path in listed.get(group, ())],
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


def check_csv(metrics_csv: Optional[str], manifest: Any) -> Optional[str]:
  """None if metrics.csv holds the manifest's rows 1..t unchanged."""
  if metrics_csv is None:
    return None
  expected = manifest['metrics_csv']
  try:
    actual = csv_digest(metrics_csv, int(manifest['round_num']))
  except (OSError, ValueError, KeyError, csv.Error) as e:
    return f'{metrics_csv} cannot be read ({e})'
  if actual != expected:
    return (
        f'{metrics_csv} rows 1..{manifest["round_num"]} differ from those '
        f'of the checkpoint ({actual["rows"]} rows, {expected["rows"]} listed)'
    )
  return None


def check_per_client_csv(path: Optional[str], manifest: Any) -> Optional[str]:
  """None if per_client_metrics.csv starts as listed, or is not listed.

  A version written without per-client evaluation lists no such file: its
  rows (if any) are not vouched for, and not damage of this version.
  """
  if path is None or per_client_csv_lib.MANIFEST_KEY not in manifest:
    return None
  return per_client_csv_lib.check(
      path, manifest[per_client_csv_lib.MANIFEST_KEY]
  )


def roll_back_per_client_csv(path: Optional[str], manifest: Any) -> None:
  """Cuts per_client_metrics.csv back to the checked version's size."""
  if path is not None and per_client_csv_lib.MANIFEST_KEY in manifest:
    per_client_csv_lib.roll_back(
        path, manifest[per_client_csv_lib.MANIFEST_KEY]
    )


def version_rounds(checkpoint_dir: str) -> list[int]:
  """The rounds of the version directories (`program_state_<t>`), ascending."""
  try:
    names = os.listdir(checkpoint_dir)
  except FileNotFoundError:
    return []
  return sorted(
      int(m.group(1)) for m in map(_VERSION_DIR.fullmatch, names) if m
  )


def resume_round(
    checkpoint_dir: str,
    metrics_csv: Optional[str] = None,
    per_client_csv: Optional[str] = None,
) -> Optional[int]:
  """The round a rerun resumes from, or None (it starts from round 1).

  The one answer every message gives (a full disk, a lost worker): the
  newest version whose manifest is usable and whose listed files and
  metrics.csv rows check, as the resume walks them; versions older than the
  oldest with a manifest (legacy) by their directory alone. The disk
  store's files and the program state's load are checked by the resume
  itself (`Checkpoints.resume`), which may fall back further.
  """
  rounds = version_rounds(checkpoint_dir)
  verified = [t for t in rounds if has_manifest(checkpoint_dir, t)]
  for round_num in reversed(rounds):
    if verified and round_num >= min(verified):
      manifest, problem = read(checkpoint_dir, round_num)
      problem = problem or check_group(checkpoint_dir, manifest, FILES)
      if (
          problem
          or check_csv(metrics_csv, manifest)
          or check_per_client_csv(per_client_csv, manifest)
      ):
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
  run_dir = os.path.dirname(os.path.abspath(checkpoint_dir))
  damaged = os.path.join(run_dir, DAMAGED_DIR)
  os.makedirs(damaged, exist_ok=True)
  source = version_dir(checkpoint_dir, round_num)
  stamp = time.strftime('%Y%m%d-%H%M%S')
  target = os.path.join(damaged, f'{os.path.basename(source)}-{stamp}')
  suffix = 0
  while os.path.exists(target + (f'-{suffix}' if suffix else '')):
    suffix += 1
  target += f'-{suffix}' if suffix else ''
  shutil.move(source, target)
  return target
