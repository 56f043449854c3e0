"""A damaged newest checkpoint never ends a run (issue 43, deliverable 3).

What a user does: `scripts/run_experiment.py` to round 2 (a checkpoint every
round), damage a file of the newest checkpoint, rerun the same command to
round 3. The rerun must resume from round 1's checkpoint, move round 2's aside
to `damaged/`, and end with the metrics of an uninterrupted run to the bit
(times aside). One run to round 2 per algorithm is copied for every case;
it, the uninterrupted reference run and the reruns of the damaged copies run
in the test's process, on the session's TFF worker (tests/experiments/
session_worker.py): nothing but the files on disk passes from one run to the
next, as between a user's two processes, and the rerun's warning and progress
line are read from its log and stdout. The run that finds no intact version is
the script in its own process: its exit status and one line are the user's.
"""

import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests import file_trees
from tests import script_runs
from tests.experiments import session_worker
from tff_fedwin.training import disk_store_chain

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
_SCRIPT = os.path.join(_ROOT, 'scripts', 'run_experiment.py')
_NAME = 'run'
_ALGORITHM_FLAGS = {
    'fedavg_window': ['--window_size=2', '--window_location=program'],
    'scaffold_disk': ['--algorithm=scaffold', '--client_states=disk'],
}


def _flags(data_npz, algorithm, total_rounds):
  return [
      '--task=npz',
      f'--data_npz={data_npz}',
      '--num_clients=4',
      '--clients_per_round=2',
      '--rounds_per_eval=1',
      '--rounds_per_checkpoint=1',
      '--client_batch_size=10',
      f'--experiment_name={_NAME}',
      f'--total_rounds={total_rounds}',
      *_ALGORITHM_FLAGS[algorithm],
  ]


def _args(root, data_npz, algorithm, total_rounds, *extra):
  return [
      f'--root_output_dir={root}',
      *_flags(data_npz, algorithm, total_rounds),
      *extra,
  ]


def run_script(root, data_npz, algorithm, total_rounds, *extra):
  """Runs the script with `--root_output_dir=root`; the CompletedProcess."""
  return subprocess.run(
      [
          sys.executable,
          _SCRIPT,
          *_args(root, data_npz, algorithm, total_rounds, *extra),
      ],
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
      cwd=_ROOT,
  )


def run_in_process(root, data_npz, algorithm, total_rounds, *extra):
  """`run_script`'s run in this process (`script_runs.run_in_process`), for
  the runs checked only by their outputs: no interpreter or TF start.

  Returns:
    The rounds evaluated (`--rounds_per_eval=1`: every round up to
    `total_rounds`).
  """
  summary = script_runs.run_in_process(
      _args(root, data_npz, algorithm, total_rounds, *extra)
  )
  return summary['eval_rounds']


def numbers(run_dir):
  """metrics.csv rows and summary.json without the times (str values)."""
  with open(os.path.join(run_dir, 'metrics.csv'), newline='') as f:
    rows = [
        {k: v for k, v in row.items() if not k.endswith('_seconds')}
        for row in csv.DictReader(f)
    ]
  with open(os.path.join(run_dir, 'summary.json')) as f:
    summary = json.load(f)
  kept = {k: summary[k] for k in ('window', 'global', 'eval_rounds')}
  return rows, kept


@pytest.fixture(scope='module')
def data_npz(tmp_path_factory):
  """A tiny `.npz` task (as tests/scripts/conftest.py's): 60/20 8x8 images."""
  rng = np.random.default_rng(3)
  path = str(tmp_path_factory.mktemp('data') / 'tiny.npz')
  np.savez(
      path,
      x_train=rng.random((60, 8, 8), dtype=np.float32),
      y_train=np.arange(60) % 10,
      x_test=rng.random((20, 8, 8), dtype=np.float32),
      y_test=np.arange(20) % 10,
  )
  return path


@pytest.fixture(scope='module')
def runs(tmp_path_factory, data_npz, tff_execution_context):
  """algorithm -> (uninterrupted numbers, root stopped at 2, its copy)."""
  made = {}

  def get(algorithm):
    if algorithm not in made:
      base = tmp_path_factory.mktemp(algorithm)
      # Uninterrupted runs, checked by their outputs only: in this process.
      with session_worker.local_runs_on(tff_execution_context):
        reference = run_in_process(base / 'reference', data_npz, algorithm, 3)
        assert reference == [1, 2, 3]
        stopped = run_in_process(base / 'stopped', data_npz, algorithm, 2)
        assert stopped == [1, 2]
      # The disk store belongs to its checkpoint directory's path: each case
      # resumes in the same place, from a fresh copy of this pristine one.
      shutil.copytree(base / 'stopped' / _NAME, base / 'pristine')
      made[algorithm] = (
          numbers(base / 'reference' / _NAME),
          base / 'stopped',
          base / 'pristine',
      )
    return made[algorithm]

  return get


def _truncate(path):
  os.truncate(path, os.path.getsize(path) // 2)


def _zero_fill(path):
  with open(path, 'r+b') as f:
    f.write(b'\0' * os.path.getsize(path))


def flip_state_of_round(store, round_num):
  """Flips a byte of the first state segment_<t> holds: a slot of its own,
  or (a client's first state) the client's row of the base file."""
  segment = disk_store_chain.read_segment(str(store), round_num)
  assert segment.rows.size, f'round {round_num} updated no client'
  row, slot = int(segment.rows[0]), int(segment.slots[0])
  if slot == disk_store_chain.IN_BASE:
    path, index, num_rows = store / 'leaf_0.bin', row, 4  # 4 clients.
  else:
    path = store / f'segment_{round_num}' / 'leaf_0.bin'
    index, num_rows = slot, int(np.sum(segment.slots >= 0))
  row_bytes = os.path.getsize(path) // num_rows
  with open(path, 'r+b') as f:
    f.seek(index * row_bytes)
    byte = f.read(1)
    f.seek(index * row_bytes)
    f.write(bytes([byte[0] ^ 0xFF]))


_DAMAGES = {
    'truncate': _truncate,
    'zero_fill': _zero_fill,
    'delete': os.remove,
    'flip_round_2': lambda path: flip_state_of_round(pathlib.Path(path), 2),
}
_V2 = 'checkpoints/program_state_2'


@pytest.mark.parametrize(
    'algorithm, relative, damage',
    [
        ('fedavg_window', f'{_V2}/saved_model.pb', 'truncate'),
        ('fedavg_window', f'{_V2}/variables/variables.index', 'zero_fill'),
        ('fedavg_window', 'checkpoints/window_models/round_2.bin', 'delete'),
        ('fedavg_window', f'{_V2}/fedwin_manifest.json', 'delete'),
        (
            'scaffold_disk',
            f'{_V2}/variables/variables.data-00000-of-00001',
            'delete',
        ),
        ('scaffold_disk', 'checkpoints/client_states', 'flip_round_2'),
    ],
)
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(
    runs,
    data_npz,
    tff_execution_context,
    capsys,
    caplog,
    algorithm,
    relative,
    damage,
):
  expected, root, pristine = runs(algorithm)
  run_dir = root / _NAME
  shutil.rmtree(run_dir)
  shutil.copytree(pristine, run_dir)
  _DAMAGES[damage](str(run_dir / relative))
  capsys.readouterr()

  with session_worker.local_runs_on(tff_execution_context):
    assert run_in_process(root, data_npz, algorithm, 3) == [1, 2, 3]

  stdout = capsys.readouterr().out
  assert 'resuming from the checkpoint of round 1 (version 1)' in stdout
  (warning,) = [
      r.getMessage()
      for r in caplog.records
      if 'The checkpoint of' in r.getMessage()
  ]
  assert warning.startswith('The checkpoint of round 2 in '), warning
  assert 'damaged or incomplete' in warning, warning
  # Set aside with what it needs outside its directory: SCAFFOLD's
  # segment of round 2 (disk states), FedAvg's window model of round 2.
  set_aside = sorted(os.listdir(run_dir / 'damaged'))
  assert [n.split('-')[0] for n in set_aside] == (
      ['client_states', 'program_state_2']
      if algorithm == 'scaffold_disk'
      else ['program_state_2']
  )
  if algorithm == 'scaffold_disk':
    kept = run_dir / 'damaged' / set_aside[0] / 'segment_2'
    assert sorted(os.listdir(kept)) == sorted(
        os.listdir(pristine / 'checkpoints' / 'client_states' / 'segment_2')
    )
  elif (
      'window_models/round_2.bin' not in relative and 'manifest' not in relative
  ):
    outside = run_dir / 'damaged' / set_aside[0] / 'outside' / 'window_models'
    assert (outside / 'round_2.bin').read_bytes() == (
        pristine / 'checkpoints' / 'window_models' / 'round_2.bin'
    ).read_bytes()
  assert numbers(run_dir) == expected


def test_no_intact_version_leaves_the_client_states_untouched(runs, data_npz):
  # Version 2 lacks a file, version 0's program state is truncated, and
  # version 1 is whole but a client state its segment vouches for is
  # damaged: it is verified before the store is opened, so the store keeps
  # every segment and base row for a restored copy.
  _, root, pristine = runs('scaffold_disk')
  run_dir = root / _NAME
  shutil.rmtree(run_dir)
  shutil.copytree(pristine, run_dir)
  os.remove(run_dir / _V2 / 'variables' / 'variables.data-00000-of-00001')
  _truncate(str(run_dir / 'checkpoints/program_state_0/saved_model.pb'))
  store = run_dir / 'checkpoints' / 'client_states'
  flip_state_of_round(store, 1)
  before = file_trees.tree_bytes(store)

  result = run_script(root, data_npz, 'scaffold_disk', 3)

  assert result.returncode == 1, result.stderr[-2000:]
  (line,) = [l for l in result.stderr.splitlines() if 'No checkpoint' in l]
  assert 'version 1: the client state of row ' in line, line
  assert 'does not match its CRC-32 (segment of round 1)' in line, line
  assert file_trees.tree_bytes(store) == before
  assert not (run_dir / 'damaged').exists()
