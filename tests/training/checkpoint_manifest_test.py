"""Tests for tff_fedwin.training.checkpoint_manifest: what "intact" means.

A version directory of hand-written files gets a manifest; each kind of damage
(truncated, zero-filled, a flipped byte, a missing file) is named, and the
listed sizes and CRC-32s are those `zlib.crc32` gives over the bytes the test
wrote (independent of the module's chunked reading).
"""

import json
import os
import re
import zlib

import pytest

from tff_fedwin.training import checkpoint_manifest as manifest
from tff_fedwin.training import metrics_rows

_FILES = {
    'saved_model.pb': b'program state \x00\x01' * 300,
    os.path.join('variables', 'variables.data-00000-of-00001'): bytes(
        range(256)
    )
    * 50,
}


@pytest.fixture(name='checkpoint_dir')
def _checkpoint_dir(tmp_path):
  version = tmp_path / 'checkpoints' / 'program_state_3'
  for relative, content in _FILES.items():
    (version / relative).parent.mkdir(parents=True, exist_ok=True)
    (version / relative).write_bytes(content)
  with open(tmp_path / 'metrics.csv', 'w') as f:
    f.write('round_num,loss\n1,0.5\n2,0.25\n3,0.125\n4,0.0625\n')
  directory = str(tmp_path / 'checkpoints')
  manifest.write(directory, 3, {}, str(tmp_path / 'metrics.csv'))
  return directory


def test_manifest_lists_every_file_with_its_size_and_crc32(checkpoint_dir):
  loaded, problem = manifest.read(checkpoint_dir, 3)

  assert problem is None
  expected = {
      os.path.join('program_state_3', relative): [
          len(content),
          zlib.crc32(content),
      ]
      for relative, content in _FILES.items()
  }
  # The version's copy of metrics.csv's rows 1..3 (of the 4 there; round 4
  # came after the checkpoint), listed like its other files.
  rows = b'round_num,loss\r\n1,0.5\r\n2,0.25\r\n3,0.125\r\n'
  expected[os.path.join('program_state_3', 'metrics_rows.csv')] = [
      len(rows),
      zlib.crc32(rows),
  ]
  assert loaded[manifest.FILES] == expected
  assert loaded[manifest.CLIENT_STATES] == {}
  assert loaded['metrics_csv']['rows'] == 3
  assert manifest.listed_bytes(loaded) == sum(map(len, _FILES.values())) + len(
      rows
  )
  assert manifest.check_group(checkpoint_dir, loaded, manifest.FILES) is None


def test_a_disk_store_is_listed_by_its_index_and_sized_with_its_segment(
    tmp_path,
):
  store = tmp_path / 'states'
  (store / 'segment_3').mkdir(parents=True)
  files = {
      'manifest.json': b'{"format_version": 2}',
      'segment_3/index.bin': b'index' * 7,
      'segment_3/leaf_0.bin': b'\x01' * 1000,  # Vouched for by the index.
      'segment_3/leaf_1.bin': b'\x02' * 24,
  }
  for name, content in files.items():
    (store / name).write_bytes(content)
  (tmp_path / 'checkpoints' / 'program_state_3').mkdir(parents=True)
  directory = str(tmp_path / 'checkpoints')
  listed = [str(store / 'manifest.json'), str(store / 'segment_3/index.bin')]

  manifest.write(directory, 3, {manifest.CLIENT_STATES: listed}, None)

  loaded, problem = manifest.read(directory, 3)
  assert problem is None
  assert loaded[manifest.CLIENT_STATES] == {
      name: [len(files[name]), zlib.crc32(files[name])]
      for name in ('manifest.json', 'segment_3/index.bin')
  }
  # 21 + 35 listed; 1000 + 24 of the segment's states with the store.
  assert manifest.listed_bytes(loaded) == 56
  assert manifest.listed_bytes(loaded, str(store)) == 56 + 1024


def _damage(path, kind):
  content = open(path, 'rb').read()
  if kind == 'truncated':
    content = content[: len(content) // 2]
  elif kind == 'zero_filled':
    content = bytes(len(content))
  elif kind == 'flipped_byte':
    content = content[:7] + bytes([content[7] ^ 0xFF]) + content[8:]
  if kind == 'missing':
    os.remove(path)
  else:
    with open(path, 'wb') as f:
      f.write(content)


@pytest.mark.parametrize(
    'kind, problem',
    [
        # b'program state \x00\x01' is 16 bytes, x 300 = 4800; half: 2400.
        ('truncated', r'^truncated or resized file .*saved_model\.pb \(2400 '),
        ('zero_filled', r'^checksum mismatch of .*saved_model\.pb$'),
        ('flipped_byte', r'^checksum mismatch of .*saved_model\.pb$'),
        ('missing', r'^missing file .*saved_model\.pb$'),
    ],
)
def test_each_damage_is_named(checkpoint_dir, kind, problem):
  _damage(
      os.path.join(checkpoint_dir, 'program_state_3', 'saved_model.pb'), kind
  )
  loaded, _ = manifest.read(checkpoint_dir, 3)

  found = manifest.check_group(checkpoint_dir, loaded, manifest.FILES)

  assert found is not None and re.search(problem, found), found


def test_a_changed_metrics_row_is_found_and_a_later_one_is_not(
    checkpoint_dir, tmp_path
):
  loaded, _ = manifest.read(checkpoint_dir, 3)
  csv_path = str(tmp_path / 'metrics.csv')
  with open(csv_path, 'a') as f:
    f.write('5,0.03125\n')  # After the checkpoint: not its business.
  assert metrics_rows.check_csv(csv_path, loaded) is None

  with open(csv_path, 'w') as f:
    f.write('round_num,loss\n1,0.5\n2,0.75\n3,0.125\n')
  assert metrics_rows.check_csv(csv_path, loaded) == (
      f'{csv_path} rows 1..3 differ from those of the checkpoint (3 rows, 3 '
      'listed)'
  )


def test_roll_back_csv_keeps_rows_up_to_the_round(tmp_path):
  csv_path = str(tmp_path / 'metrics.csv')
  with open(csv_path, 'w') as f:
    f.write('round_num,loss\n1,0.5\n2,0.25\n3,0.125\n')

  metrics_rows.roll_back_csv(csv_path, 2)

  assert open(csv_path).read().splitlines() == [
      'round_num,loss',
      '1,0.5',
      '2,0.25',
  ]


@pytest.mark.parametrize(
    'content, problem',
    [
        (None, r'^no manifest \(fedwin_manifest\.json\)'),
        ('{"format_version": 1, "round', r'cannot be read'),
        (
            {'format_version': 1, 'round_num': 4, 'files': {}},
            r'is of another round$',
        ),
        (
            {'format_version': 2, 'round_num': 3},
            r'has another format version$',
        ),
    ],
)
def test_an_unusable_manifest_says_why(checkpoint_dir, content, problem):
  path = manifest.manifest_path(checkpoint_dir, 3)
  os.remove(path)
  if content is not None:
    with open(path, 'w') as f:
      f.write(content if isinstance(content, str) else json.dumps(content))

  loaded, found = manifest.read(checkpoint_dir, 3)

  assert loaded is None
  assert re.search(problem, found), found


def test_move_aside_keeps_the_version_under_damaged(checkpoint_dir):
  target = manifest.move_aside(checkpoint_dir, 3)

  assert not os.path.exists(os.path.join(checkpoint_dir, 'program_state_3'))
  run_dir = os.path.dirname(checkpoint_dir)
  assert os.path.dirname(target) == os.path.join(run_dir, 'damaged')
  assert os.path.basename(target).startswith('program_state_3-')
  assert open(os.path.join(target, 'saved_model.pb'), 'rb').read() == (
      _FILES['saved_model.pb']
  )


def _set_entry(value, group='files'):
  """An edit of the manifest: its first `group` entry set to `value`."""

  def edit(loaded):
    loaded[group][sorted(loaded[group])[0]] = value

  return edit


def _rename_entry(relative):
  def edit(loaded):
    first = sorted(loaded['files'])[0]
    loaded['files'][relative] = loaded['files'].pop(first)

  return edit


def _set_key(key, value):
  def edit(loaded):
    if value is None:
      del loaded[key]
    else:
      loaded[key] = value

  return edit


@pytest.mark.parametrize(
    'edit, problem',
    [
        (_set_entry(1234), r"entry '.*' is not a \(size, CRC-32\) pair$"),
        (_set_entry([1, 2, 3]), r'is not a \(size, CRC-32\) pair$'),
        (_set_entry([True, 0]), r'is not a \(size, CRC-32\) pair$'),
        (_set_entry([-1, 0]), r'is not a \(size, CRC-32\) pair$'),
        (_set_entry([10, 1 << 32]), r'is not a \(size, CRC-32\) pair$'),
        (_set_entry(['10', 0]), r'is not a \(size, CRC-32\) pair$'),
        (
            _rename_entry('../../outside'),
            r"files entry '\.\./\.\./outside' is outside the checkpoint",
        ),
        (
            _rename_entry('/etc/hostname'),
            r"files entry '/etc/hostname' is outside the checkpoint",
        ),
        (_set_key('client_states', []), r"no 'client_states' list$"),
        (_set_key('metrics_csv', None), r'no metrics\.csv digest'),
        (_set_key('metrics_csv', {'rows': '3'}), r'no metrics\.csv digest'),
        (
            _set_key('per_client_csv', [10]),
            r'per_client_csv is not a \(size, CRC-32\) pair$',
        ),
    ],
)
def test_a_manifest_that_parses_but_is_malformed_is_unusable(
    checkpoint_dir, edit, problem
):
  path = manifest.manifest_path(checkpoint_dir, 3)
  with open(path) as f:
    loaded = json.load(f)
  edit(loaded)
  with open(path, 'w') as f:
    json.dump(loaded, f)

  found_manifest, found = manifest.read(checkpoint_dir, 3)

  assert found_manifest is None
  assert found.startswith(f'manifest {path} is malformed: '), found
  assert re.search(problem, found), found


def test_a_path_inside_the_checkpoint_directory_is_kept(checkpoint_dir):
  # 'a/../program_state_3/saved_model.pb' normalizes inside the directory.
  path = manifest.manifest_path(checkpoint_dir, 3)
  with open(path) as f:
    loaded = json.load(f)
  relative = os.path.join('program_state_3', 'saved_model.pb')
  loaded['files'][os.path.join('a', '..', relative)] = loaded['files'].pop(
      relative
  )
  with open(path, 'w') as f:
    json.dump(loaded, f)

  found_manifest, found = manifest.read(checkpoint_dir, 3)

  assert found is None
  assert manifest.check_group(checkpoint_dir, found_manifest, 'files') is None


def _versions(checkpoints, rounds, metrics_csv=None):
  """Version directories of one file each, with manifests; by round."""
  for round_num in rounds:
    version = os.path.join(checkpoints, f'program_state_{round_num}')
    os.makedirs(version)
    with open(os.path.join(version, 'saved_model.pb'), 'wb') as f:
      f.write(b'state %d' % round_num)
    manifest.write(checkpoints, round_num, {}, metrics_csv)


def test_resume_round_is_the_newest_version_whose_files_check(tmp_path):
  checkpoints = str(tmp_path / 'checkpoints')
  assert manifest.resume_round(checkpoints) is None  # No directory yet.
  _versions(checkpoints, (0, 10, 20))
  assert manifest.resume_round(checkpoints) == 20

  _damage(
      os.path.join(checkpoints, 'program_state_20', 'saved_model.pb'),
      'flipped_byte',
  )
  assert manifest.resume_round(checkpoints) == 10
  os.remove(manifest.manifest_path(checkpoints, 10))  # Incomplete: no manifest.
  assert manifest.resume_round(checkpoints) == 0


def test_resume_round_takes_a_legacy_version_by_its_directory(tmp_path):
  # Version 5 predates manifests (older than the oldest with one): the resume
  # takes it unverified once every newer version fails.
  checkpoints = str(tmp_path / 'checkpoints')
  os.makedirs(os.path.join(checkpoints, 'program_state_5'))
  _versions(checkpoints, (10,))
  os.makedirs(os.path.join(checkpoints, 'program_state_x'))  # Not a version.
  assert manifest.version_rounds(checkpoints) == [5, 10]
  assert manifest.resume_round(checkpoints) == 10

  _damage(
      os.path.join(checkpoints, 'program_state_10', 'saved_model.pb'), 'missing'
  )
  assert manifest.resume_round(checkpoints) == 5


def test_resume_round_ignores_the_rows_files(tmp_path):
  # A rows file that disagrees with version 2 is no damage of it: the
  # resume restores (metrics.csv) or refuses (per-client rows) the file.
  checkpoints = str(tmp_path / 'checkpoints')
  csv_path = str(tmp_path / 'metrics.csv')
  with open(csv_path, 'w') as f:
    f.write('round_num,loss\n1,0.5\n2,0.25\n')
  _versions(checkpoints, (1, 2), csv_path)
  with open(csv_path, 'w') as f:  # Row 2 changed, row 1 kept.
    f.write('round_num,loss\n1,0.5\n2,0.75\n')

  assert manifest.resume_round(checkpoints) == 2


def test_every_listed_file_and_directory_is_fsynced_before_the_manifest(
    tmp_path, monkeypatch
):
  version = tmp_path / 'checkpoints' / 'program_state_3'
  for relative, content in _FILES.items():
    (version / relative).parent.mkdir(parents=True, exist_ok=True)
    (version / relative).write_bytes(content)
  outside = tmp_path / 'window' / 'round_3.npz'  # Another group's file.
  outside.parent.mkdir()
  outside.write_bytes(b'window model')
  synced = []
  real_fsync = os.fsync

  def recording_fsync(fd):
    synced.append(os.readlink(f'/proc/self/fd/{fd}'))
    real_fsync(fd)

  metrics = tmp_path / 'metrics.csv'  # Vouched for by its digest.
  metrics.write_text('round_num,loss\n1,0.5\n')
  monkeypatch.setattr(os, 'fsync', recording_fsync)
  directory = str(tmp_path / 'checkpoints')
  manifest.write(directory, 3, {'client_states': [str(outside)]}, str(metrics))

  # The manifest's own temporary file, then its directory, come last.
  (manifest_at,) = [
      i for i, p in enumerate(synced) if '.fedwin_manifest.json.' in p
  ]
  assert synced[manifest_at + 1 :] == [str(version)]
  before = set(synced[:manifest_at])
  assert {str(version / r) for r in _FILES} | {
      str(outside),
      str(metrics),
      str(version / 'metrics_rows.csv'),
  } <= before
  assert {
      str(version / 'variables'),
      str(version),
      directory,
      str(outside.parent),
      str(tmp_path),  # metrics.csv's directory.
  } <= before
