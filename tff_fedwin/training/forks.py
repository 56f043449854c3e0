"""Starting a run from another run's checkpoint: a fork at round k.

A run (the target) whose rounds 1..k are those of another run (the trunk)
need not train them: `fork_run` writes the target's directory as if it had
stopped after round k (its program state of round k and its metrics.csv rows
1..k, both mapped by the caller to the target's form), and `run_training`
then resumes it (docs/design.md sec. 5.6). `forked_from.json` in the target's
directory names the trunk and k.
"""

import csv
import json
import os
from collections.abc import Callable, Mapping
from typing import Any, Optional

import tensorflow_federated as tff

from tff_fedwin.training import checkpoint_manifest as manifest_lib
from tff_fedwin.training import checkpoints as checkpoints_lib
from tff_fedwin.training import loop
from tff_fedwin.training import metrics_rows
from tff_fedwin.training import outputs

StateFn = Callable[[Any], Any]
RowFn = Callable[[Mapping[str, str]], Mapping[str, str]]


def forked_from_round(run_dir: str) -> Optional[int]:
  """k if the run in `run_dir` was forked at round k, else None."""
  path = _paths(run_dir).fork_json
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return int(json.load(f)['round_num'])


def kept_rounds(run_dir: str) -> list[int]:
  """The rounds of the program states kept in `run_dir`'s checkpoints."""
  directory = _paths(run_dir).checkpoints
  if not os.path.isdir(directory):
    return []
  manager = tff.program.FileProgramStateManager(directory)
  with loop.event_loop() as run:
    return sorted(run(manager.get_versions()) or [])


def _paths(run_dir: str) -> outputs.RunPaths:
  return outputs.RunPaths(os.path.dirname(run_dir), os.path.basename(run_dir))


def _copy_rows(source: str, target: str, round_num: int, row_fn: RowFn):
  """Writes `row_fn` of `source`'s rows 1..k to `target` (atomically)."""
  with open(source, newline='') as f:
    rows = [
        row_fn(row)
        for row in csv.DictReader(f)
        if int(row[outputs.ROUND_KEY]) <= round_num
    ]
  if not rows or int(rows[-1][outputs.ROUND_KEY]) != round_num:
    raise ValueError(f'{source} has no row of round {round_num} to fork.')
  fieldnames = list(dict.fromkeys(key for row in rows for key in row))
  temporary = target + '.tmp'
  with open(temporary, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(rows)
  os.replace(temporary, target)


def _rows_source(trunk: outputs.RunPaths, round_num: int) -> str:
  """The trunk's rows 1..k as its checkpoint of round k vouches for them:
  the version's copy (checked with the version), else metrics.csv if it
  agrees with the version's digest (ValueError if not)."""
  version = manifest_lib.version_dir(trunk.checkpoints, round_num)
  copy = os.path.join(version, metrics_rows.COPY)
  if os.path.exists(copy):
    return copy
  manifest, _ = manifest_lib.read(trunk.checkpoints, round_num)
  problem = manifest and metrics_rows.check_csv(trunk.metrics_csv, manifest)
  if problem:
    raise ValueError(f'Cannot fork at round {round_num}: {problem}.')
  return trunk.metrics_csv


def fork_run(
    *,
    trunk_dir: str,
    target_dir: str,
    round_num: int,
    identity: checkpoints_lib.RunIdentity,
    trunk_initial_state: Any,
    state_fn: StateFn,
    row_fn: RowFn,
) -> None:
  """Makes `target_dir` a run stopped after round k, from the trunk's files.

  Writes the target's metrics.csv (`row_fn` of the trunk's rows 1..k) and
  `forked_from.json`, then its checkpoint of round k (`state_fn` of the
  trunk's state of round k), which is what a resume finds: a fork killed
  midway is made again. TensorBoard events of rounds 1..k stay the trunk's.

  Args:
    trunk_dir: The trunk's run directory; its checkpoint of round k must be
      kept (`CHECKPOINTS_TO_KEEP`: stop the trunk at k, fork, resume it).
    target_dir: The target's run directory, without a checkpoint.
    round_num: k >= 1.
    identity: The seed, clients per round and population both runs share.
    trunk_initial_state: The trunk process's initial state (its structure).
    state_fn: Maps the trunk's state of round k to the target's.
    row_fn: Maps a trunk metrics.csv row (`csv.DictReader`) to the target's.

  Raises:
    FileExistsError: If the target has a checkpoint (it is a run already).
    CheckpointMismatchError: If the trunk's checkpoint was made with another
      identity.
    NoIntactCheckpointError: If the trunk's checkpoint of round k is damaged
      (checked as a resume checks it).
    ValueError: If the trunk's metrics.csv rows 1..k are not those its
      checkpoint vouches for (and the checkpoint keeps no copy of them).
    tff.program.ProgramStateNotFoundError: If the trunk's round k is not kept.
  """
  trunk = _paths(trunk_dir)
  target = _paths(target_dir)
  if kept_rounds(target_dir):
    raise FileExistsError(
        f'Cannot fork into {target_dir}: it has checkpoints (a run already).'
    )
  with loop.event_loop() as run:
    restored = checkpoints_lib.Checkpoints(
        trunk.checkpoints, identity=identity, run=run
    ).load_version(trunk_initial_state, round_num)
    state = state_fn(restored.server_state)
    os.makedirs(target.root, exist_ok=True)
    _copy_rows(
        _rows_source(trunk, round_num), target.metrics_csv, round_num, row_fn
    )
    outputs.write_json_atomically(
        dict(trunk_dir=os.path.abspath(trunk_dir), round_num=round_num),
        target.fork_json,
    )
    checkpoints_lib.Checkpoints(
        target.checkpoints,
        identity=identity,
        run=run,
        metrics_csv=target.metrics_csv,
    ).save(state, round_num, None)
