"""`<run dir>/damaged/`: where a resume moves what it does not use.

Nothing a resume sets aside is deleted: a damaged or incomplete checkpoint
version, a metrics.csv that disagrees with the checkpoints, the files a
set-aside version needs outside its directory (docs/design.md sec. 5.3.1).
"""

import os
import shutil
import time
from typing import Any, Optional

from tff_fedwin.training import disk_store_chain as chain_lib
from tff_fedwin.training import disk_store_layout as layout

DAMAGED_DIR = 'damaged'


def target(run_dir: str, name: str) -> str:
  """A free path `<run dir>/damaged/<name>-<time>[-<n>]` (the directory made)."""
  damaged = os.path.join(run_dir, DAMAGED_DIR)
  os.makedirs(damaged, exist_ok=True)
  path = os.path.join(damaged, f'{name}-{time.strftime("%Y%m%d-%H%M%S")}')
  suffix = 0
  while os.path.lexists(path + (f'-{suffix}' if suffix else '')):
    suffix += 1
  return path + (f'-{suffix}' if suffix else '')


def _keep(source: str, destination: str) -> None:
  """A hard link of `source` at `destination` (a copy across devices)."""
  os.makedirs(os.path.dirname(destination), exist_ok=True)
  try:
    os.link(source, destination)
  except OSError:
    shutil.copy2(source, destination)


def keep_outside_files(checkpoint_dir: str, manifest: Any, target: str) -> None:
  """Keeps in `target/outside/` the files a set-aside version lists outside
  its own directory (a memory store's snapshot, the window's round models),
  which the resumed run deletes as it goes on."""
  own = f'program_state_{manifest["round_num"]}'
  for relative in manifest.get('files', {}):
    if os.path.normpath(relative).split(os.sep)[0] == own:
      continue
    source = os.path.join(checkpoint_dir, relative)
    if os.path.isfile(source):
      _keep(source, os.path.join(target, 'outside', relative))


def keep_newer_segments(
    run_dir: str, store_dir: str, round_num: int
) -> Optional[str]:
  """Keeps the disk store's segments of rounds after t in
  `<run dir>/damaged/client_states-<time>/` before the resume from round t
  drops them; returns that directory (None if there are none)."""
  rounds = [
      r
      for r in (
          layout.segment_rounds(store_dir) if os.path.isdir(store_dir) else ()
      )
      if r > round_num
  ]
  if not rounds:
    return None
  kept = target(run_dir, 'client_states')
  for segment in rounds:
    source = layout.segment_dir(store_dir, segment)
    for entry in os.listdir(source):
      _keep(
          os.path.join(source, entry),
          os.path.join(kept, os.path.basename(source), entry),
      )
  return kept


def keep_store(run_dir: str, store_dir: str) -> Optional[str]:
  """Keeps a disk store that holds states past round 0 in
  `<run dir>/damaged/client_states-<time>/` before it is replaced; returns
  that directory (None if the store holds nothing past round 0)."""
  if not os.path.isdir(store_dir):
    return None
  segments = [r for r in layout.segment_rounds(store_dir) if r > 0]
  try:
    past_0 = (
        bool(segments) or (chain_lib.read_base(store_dir).round_num or 0) > 0
    )
  except (OSError, ValueError):
    past_0 = os.path.exists(os.path.join(store_dir, layout.BASE))
  if not past_0:
    return None
  kept = target(run_dir, 'client_states')
  for parent, _, names in os.walk(store_dir):
    relative = os.path.relpath(parent, store_dir)
    if relative.split(os.sep)[0] == layout.PENDING:
      continue
    for name in names:
      if name != layout.LOCK:
        _keep(os.path.join(parent, name), os.path.join(kept, relative, name))
  return kept
