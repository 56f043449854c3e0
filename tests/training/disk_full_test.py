"""A full disk ends a run with one line; the rerun resumes (issue 43, item 4).

What a user does, on a small tmpfs the test mounts (root only; else skipped):
`scripts/run_experiment.py` to round 2, the disk filled (a filler file leaves
a few KB) and the same command to round 4: it must stop with one line naming
the path and the space to free, leaving round 2's checkpoint intact; the
filler deleted, the rerun must resume from round 2 and end with the numbers
of an uninterrupted run (times aside).
"""

import asyncio
import errno
import os

import numpy as np
import pytest

from tests.training import damaged_checkpoint_test as damaged
from tests.training import full_disk
from tff_fedwin.training import checkpoints as checkpoints_lib
from tff_fedwin.training import disk_full

data_npz = damaged.data_npz
tmpfs = full_disk.tmpfs
_ALGORITHM = 'fedavg_window'
# The training examples stay in the driver: the full disk hits the loop's
# files (checkpoints, window models, metrics), not `client_data/`.
_VALUES = '--client_data_transfer=values'


def test_a_full_disk_stops_with_one_line_and_the_rerun_resumes(
    tmp_path, tmpfs, data_npz
):
  # The uninterrupted reference and the first run show only their outputs:
  # in this process; the full-disk run and the rerun are the script's own.
  reference = damaged.run_in_process(
      tmp_path / 'ref', data_npz, _ALGORITHM, 4, _VALUES
  )
  assert reference == [1, 2, 3, 4]
  root = tmpfs / 'out'
  first = damaged.run_in_process(root, data_npz, _ALGORITHM, 2, _VALUES)
  assert first == [1, 2]
  filler = full_disk.fill(str(tmpfs), 16 * 1024)

  full = damaged.run_script(root, data_npz, _ALGORITHM, 4, _VALUES)

  assert full.returncode == 1
  last = full.stderr.strip().splitlines()[-1]
  assert last.startswith('run_experiment.py: The disk is full:'), full.stderr
  assert str(tmpfs) in last
  assert 'Free at least' in last and 'MB' in last
  assert 'Traceback' not in full.stderr

  os.remove(filler)
  rerun = damaged.run_script(root, data_npz, _ALGORITHM, 4, _VALUES)

  assert rerun.returncode == 0, rerun.stderr[-2000:]
  # Round 2's checkpoint stayed intact: the rerun resumes from it, and sets
  # aside at most the half-written round 3 (never round 2).
  assert 'resuming from the checkpoint of round 2 (version 2)' in rerun.stdout
  assert 'checkpoint of round 2 in' not in rerun.stderr
  assert damaged.numbers(root / damaged._NAME) == damaged.numbers(
      tmp_path / 'ref' / damaged._NAME
  )


def test_the_line_names_the_round_the_resume_takes(tmp_path):
  # Version 3 has a manifest but a damaged program state: the resume takes
  # version 2, and the full-disk line says so (checkpoint_manifest
  # .resume_round, as every such message).
  loop = asyncio.new_event_loop()
  checkpoints = checkpoints_lib.Checkpoints(
      str(tmp_path / 'checkpoints'),
      identity=checkpoints_lib.RunIdentity(5, 2, 4),
      run=loop.run_until_complete,
  )
  try:
    for round_num in (2, 3):
      state = {'w': np.full([2], round_num, np.float32)}
      checkpoints.save(state, round_num, None)
    saved_model = (
        tmp_path / 'checkpoints' / 'program_state_3' / 'saved_model.pb'
    )
    with open(saved_model, 'r+b') as f:
      f.truncate(10)

    line = disk_full.message(
        OSError(errno.ENOSPC, 'No space left on device', 'metrics.csv'),
        checkpoints,
    )
  finally:
    loop.close()

  assert line.startswith(
      'The disk is full: no space left on device writing metrics.csv.'
  )
  assert line.endswith(
      'and rerun the same command: it resumes from the checkpoint of round 2.'
  )
