"""A damaged metrics.csv never costs a checkpoint (tff_fedwin.training.metrics_rows).

A SCAFFOLD run with its client states on disk checkpoints rounds 2 and 4;
then metrics.csv is deleted, edited, torn or cut as a power loss leaves an
unsynced tail. The rerun resumes from round 4 (the newest version, intact),
gets rows 1..4 back from that version's copy, byte for byte as the run wrote
them, and moves the file it found to damaged/; the disk store is untouched.
"""

import csv
import json
import os
import shutil

import pytest

from tests.training import loop_fixtures
from tff_fedwin.training import checkpoint_manifest
from tff_fedwin.training import checkpoints as checkpoints_lib
from tff_fedwin.training import metrics_rows


def _run(processes, directory, **overrides):
  return loop_fixtures.run(
      loop_fixtures.make_runner(processes, 'scaffold'),
      directory,
      client_states='disk',
      **overrides,
  )


@pytest.fixture(scope='module', name='four_rounds')
def _four_rounds(processes, tmp_path_factory):
  """Rounds 1-4 (checkpoints 0, 2, 4): the run's root, a pristine copy of its
  directory and its metrics.csv bytes. The disk store belongs to the run
  directory's path: each test restores the copy there."""
  root = tmp_path_factory.mktemp('four_rounds')
  _run(processes, root)
  pristine = tmp_path_factory.mktemp('pristine') / 'exp'
  shutil.copytree(root / 'exp', pristine)
  with open(root / 'exp' / 'metrics.csv', 'rb') as f:
    return root, pristine, f.read()


@pytest.fixture(name='copy_of_run')
def _copy_of_run(four_rounds):
  root, pristine, csv_bytes = four_rounds
  shutil.rmtree(root / 'exp')
  shutil.copytree(pristine, root / 'exp')
  return root, root / 'exp', csv_bytes


def _store_files(run_dir):
  store = run_dir / 'checkpoints' / 'client_states'
  return {
      str(p.relative_to(store)): p.read_bytes()
      for p in sorted(store.rglob('*'))
      if p.is_file() and p.name != '.lock'
  }


def _edit(path):
  rows = list(csv.reader(open(path, newline='')))
  rows[2][1] = '0.5'  # Round 2's first metric, as a spreadsheet re-saves.
  with open(path, 'w', newline='') as f:
    csv.writer(f).writerows(rows)


def _tear(path):
  # A full disk tore the last row (round 4) right after its first byte: it
  # still parses, as a second round-1 row.
  data = open(path, 'rb').read()
  last = data.rindex(b'\n', 0, len(data) - 1) + 1
  with open(path, 'wb') as f:
    f.write(data[:last] + b'1')


def _power_loss(path):
  # The page cache's unsynced tail is gone: the file ends mid-row.
  data = open(path, 'rb').read()
  with open(path, 'wb') as f:
    f.write(data[: len(data) // 2])


_DAMAGES = {
    'deleted': os.remove,
    'edited': _edit,
    'torn': _tear,
    'power_loss': _power_loss,
}


@pytest.mark.parametrize('damage', sorted(_DAMAGES))
def test_a_damaged_metrics_file_costs_no_checkpoint(
    processes, copy_of_run, damage, caplog
):
  root, run_dir, csv_bytes = copy_of_run
  store_before = _store_files(run_dir)
  _DAMAGES[damage](run_dir / 'metrics.csv')

  summary = _run(processes, root, total_rounds=5)

  assert summary['resumed_from_round'] == 4
  data = open(run_dir / 'metrics.csv', 'rb').read()
  assert data.startswith(csv_bytes)  # Rows 1..4 as written, then round 5.
  assert [r['round_num'] for r in loop_fixtures.read_csv(root)] == [
      '1',
      '2',
      '3',
      '4',
      '5',
  ]
  damaged = run_dir / 'damaged'
  aside = os.listdir(damaged) if damaged.exists() else []
  assert [n.split('-')[0] for n in aside] == (
      [] if damage == 'deleted' else ['metrics.csv']
  )
  assert 'restored from the checkpoint' in caplog.text
  # Versions 2 and 4 kept, their states too (round 5 wrote a new segment).
  assert set(checkpoint_manifest.version_rounds(run_dir / 'checkpoints')) >= {
      2,
      4,
  }
  store_after = _store_files(run_dir)
  for name in ('segment_2/index.bin', 'segment_4/index.bin', 'base.bin'):
    assert store_after[name] == store_before[name]


def _drop_copy(run_dir, round_num):
  """Version t as written before checkpoints kept a copy of the rows."""
  version = run_dir / 'checkpoints' / f'program_state_{round_num}'
  os.remove(version / metrics_rows.COPY)
  path = version / checkpoint_manifest.MANIFEST
  manifest = json.loads(path.read_text())
  del manifest['files'][f'program_state_{round_num}/{metrics_rows.COPY}']
  path.write_text(json.dumps(manifest))


def test_rows_a_version_has_no_copy_of_stop_the_run_in_one_line(
    processes, copy_of_run
):
  root, run_dir, _ = copy_of_run
  _drop_copy(run_dir, 4)
  _edit(run_dir / 'metrics.csv')
  listing = sorted(os.listdir(run_dir / 'checkpoints'))

  with pytest.raises(
      metrics_rows.RowsFileError,
      match=r'metrics\.csv disagrees with the checkpoint \(.*metrics\.csv '
      r'rows 1\.\.4 differ from those of the checkpoint \(4 rows, 4 listed\)'
      r'\); the checkpoint of round 4 was written before checkpoints kept a '
      r'copy of the rows; restore .*metrics\.csv or move it aside to resume '
      r'without rows 1\.\.4\. Nothing was moved\.$',
  ):
    _run(processes, root, total_rounds=5)

  assert sorted(os.listdir(run_dir / 'checkpoints')) == listing
  assert not os.path.exists(run_dir / 'damaged')


def test_a_fallback_to_round_0_is_refused_and_moves_nothing(
    processes, copy_of_run
):
  root, run_dir, _ = copy_of_run
  for round_num in (2, 4):  # Both newer versions lose their manifest.
    os.remove(
        run_dir
        / 'checkpoints'
        / f'program_state_{round_num}'
        / checkpoint_manifest.MANIFEST
    )
  store_before = _store_files(run_dir)

  with pytest.raises(
      checkpoints_lib.NoIntactCheckpointError,
      match=r'^Only the checkpoint of round 0 in .*checkpoints is intact; the '
      r'run would start over: version 4: no manifest .*; version 2: no '
      r'manifest .*\. Nothing was moved\. Restore a good copy of the run '
      r'directory, or move .*checkpoints aside to start the run again\.$',
  ):
    _run(processes, root, total_rounds=5)

  assert not os.path.exists(run_dir / 'damaged')
  assert _store_files(run_dir) == store_before
