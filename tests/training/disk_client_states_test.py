"""Tests of what only DiskClientStateStore has: files, segments, crash points.

Behaviour shared with the memory store is in client_state_stores_test.py.
"""

import collections
import errno
import json
import os
import shutil
import stat
import threading

import numpy as np
import pytest

from tests.training import full_disk
from tff_fedwin.training import client_state_spec
from tff_fedwin.training import disk_client_states
from tff_fedwin.training import disk_store_chain
from tff_fedwin.training import row_files

_Store = disk_client_states.DiskClientStateStore
tmpfs = full_disk.tmpfs
IDS = [f'client_{i}' for i in range(1000)]
# One state: 2**18 float32 = 1 MiB, plus a 4-byte counter.
ROW_BYTES = 2**20


def _template(shape=(2**18,)):
  return collections.OrderedDict(
      c=np.zeros(shape, np.float32), n=np.zeros([], np.int32)
  )


def _state(value):
  return collections.OrderedDict(
      c=np.full([2**18], value, np.float32), n=np.int32(value)
  )


def _create(directory, **kwargs):
  args = dict(template=_template(), client_ids=IDS, owner='run')
  args.update(kwargs)
  return _Store.create(str(directory), **args)


def _restore(directory, round_num, **kwargs):
  args = dict(template=_template(), client_ids=IDS, owner='run')
  args.update(kwargs)
  return _Store.restore(str(directory), round_num=round_num, **args)


def _checkpoint(store, round_num):
  store.prepare_checkpoint(round_num)
  store.finish_checkpoint(round_num)


def _counters(store, ids):
  return [int(s['n']) for s in store.get(ids)]


def _allocated(path):
  return os.stat(path).st_blocks * 512


def test_base_files_are_sparse_until_rows_are_written(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  leaf = os.path.join(tmp_path, 'leaf_0.bin')
  # 1000 clients x 1 MiB apparent size, no block used yet.
  assert os.path.getsize(leaf) == 1000 * ROW_BYTES
  assert _allocated(leaf) == 0

  store.update(['client_3', 'client_500', 'client_999'], [_state(1)] * 3)
  _checkpoint(store, 1)

  # Three 1 MiB rows at 1 MiB-aligned offsets: exactly three rows' blocks.
  assert _allocated(leaf) == 3 * ROW_BYTES
  store.close()


def _index(directory, round_num):
  segment = disk_store_chain.read_segment(str(directory), round_num)
  return segment.rows.tolist(), segment.slots.tolist()


def test_each_state_is_written_once(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1', 'client_2'], [_state(1), _state(2)])
  _checkpoint(store, 1)
  store.update(['client_1'], [_state(3)])  # A later state: a slot.
  store.update(['client_1'], [_state(4)])  # The same slot, written again.
  store.update(['client_7'], [_state(7)])  # A first state: in place.

  store.prepare_checkpoint(2)

  # First states are in the base file, read from there (slot -1).
  assert _index(tmp_path, 1) == ([1, 2], [-1, -1])
  assert _index(tmp_path, 2) == ([1, 7], [0, -1])
  segment = os.path.join(tmp_path, 'segment_2')
  assert os.path.getsize(os.path.join(segment, 'leaf_0.bin')) == ROW_BYTES
  assert os.path.getsize(os.path.join(segment, 'leaf_1.bin')) == 4
  leaf = os.path.join(tmp_path, 'leaf_0.bin')
  assert _allocated(leaf) == 3 * ROW_BYTES  # Rows 1, 2, 7: written once.
  store.finish_checkpoint(2)
  assert _counters(store, ['client_1', 'client_2', 'client_7']) == [4, 2, 7]
  assert _allocated(leaf) == 3 * ROW_BYTES  # No merge: 3 states < 1000.
  store.close()


def test_killed_after_segment_before_program_state_restores_the_older_round(
    tmp_path,
):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(1)])
  _checkpoint(store, 1)
  store.update(['client_1', 'client_2'], [_state(5), _state(6)])
  store.prepare_checkpoint(2)  # Then killed: program state 2 never saved.
  store.close()

  restored = _restore(tmp_path, 1)

  # client_2's first state was written in its base row: unread at round 1.
  assert _counters(restored, ['client_1', 'client_2']) == [1, 0]
  assert not os.path.exists(os.path.join(tmp_path, 'segment_2'))
  restored.close()


def test_killed_after_program_state_restores_the_checkpoint(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1', 'client_2'], [_state(5), _state(6)])
  store.prepare_checkpoint(2)  # Program state 2 saved, then killed.
  store.close()

  restored = _restore(tmp_path, 2)

  assert _counters(restored, ['client_1', 'client_2', 'client_3']) == [5, 6, 0]
  restored.close()


def test_updates_after_the_last_checkpoint_are_dropped_on_restore(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(3)])
  store.close()  # Killed mid-round.

  restored = _restore(tmp_path, 0)

  assert _counters(restored, ['client_1']) == [0]
  assert not os.path.exists(os.path.join(tmp_path, 'pending'))
  restored.close()


_SMALL_IDS = [f'c{i}' for i in range(4)]


def _small(value):
  return collections.OrderedDict(
      c=np.full([3], value, np.float32), n=np.int32(value)
  )


def _small_store(directory):
  return _create(directory, template=_small(0), client_ids=_SMALL_IDS)


def _small_counters(directory, round_num):
  store = _restore(
      directory, round_num, template=_small(0), client_ids=_SMALL_IDS
  )
  try:
    return _counters(store, _SMALL_IDS)
  finally:
    store.close()


def test_segments_merge_and_every_kept_version_restores(tmp_path):
  """4 clients, a checkpoint every round, the last 4 rounds kept.

  Round r updates clients r % 4 and (r + 1) % 4 to the value r. From round
  2 on each round adds 2 slots, so the segments pass the population's 4
  states and merge up to the oldest kept nonzero round.
  """
  expected = {}
  state = [0, 0, 0, 0]
  store = _small_store(tmp_path / 'store')
  for round_num in range(1, 13):
    ids = [round_num % 4, (round_num + 1) % 4]
    store.update([_SMALL_IDS[i] for i in ids], [_small(round_num)] * 2)
    for i in ids:
      state[i] = round_num
    expected[round_num] = list(state)
    kept = [0] + list(range(max(1, round_num - 3), round_num + 1))
    store.prepare_checkpoint(round_num)
    store.finish_checkpoint(round_num, kept)
  store.close()
  directory = tmp_path / 'store'
  base = disk_store_chain.read_base(str(directory))
  # Merged at least once, never past the oldest kept nonzero round (9).
  assert base.round_num is not None and 1 <= base.round_num <= 9
  assert len(os.listdir(directory)) <= 3 + 2 + 12 - base.round_num
  for round_num in range(max(9, base.round_num), 13):
    copy = tmp_path / f'copy_{round_num}'
    shutil.copytree(directory, copy)
    assert _small_counters(copy, round_num) == expected[round_num], round_num


def test_more_segments_than_max_segments_merge(tmp_path, monkeypatch):
  # 1000 clients, 1 slot a checkpoint: only the count of segments merges.
  monkeypatch.setattr(disk_client_states, 'MAX_SEGMENTS', 3)
  store = _create(tmp_path, template=_small(0))
  for round_num in range(1, 11):
    store.update(['client_1'], [_small(round_num)])
    store.prepare_checkpoint(round_num)
    store.finish_checkpoint(round_num, [0, round_num - 1, round_num])
    segments = [n for n in os.listdir(tmp_path) if n.startswith('segment_')]
    assert len(segments) <= 3, (round_num, segments)
  store.close()

  # client_1's first state (round 1) is in place, every later one a slot:
  # segments {1..4} at round 4 merge up to the oldest kept round 3 -> {4};
  # {4..7} at 7 -> {7}; {7..10} at 10 merge up to 9 -> base round 9, {10}.
  assert disk_store_chain.read_base(str(tmp_path)).round_num == 9
  restored = _restore(tmp_path, 10, template=_small(0))
  assert _counters(restored, ['client_1', 'client_2']) == [10, 0]
  restored.close()


def test_a_merge_killed_before_its_commit_restores_every_kept_version(
    tmp_path, monkeypatch
):
  store = _small_store(tmp_path)
  expected = {}
  for round_num, values in enumerate(([1, 1, 1, 1], [2, 2, 1, 1]), start=1):
    ids = [_SMALL_IDS[i] for i in range(4) if values[i] == round_num]
    store.update(ids, [_small(round_num)] * len(ids))
    _checkpoint(store, round_num)
    expected[round_num] = values
  # Round 3 updates all 4 again: 2 + 4 slots > 4 states, so it merges
  # segments 1 and 2 (kept: 0, 2, 3) and is killed before base.bin.
  store.update(_SMALL_IDS, [_small(3)] * 4)
  store.prepare_checkpoint(3)

  def killed(*_):
    raise KeyboardInterrupt

  monkeypatch.setattr(disk_store_chain, 'write_base', killed)
  with pytest.raises(KeyboardInterrupt):
    store.finish_checkpoint(3, [0, 2, 3])
  store.close()
  monkeypatch.undo()

  assert disk_store_chain.read_base(str(tmp_path)).round_num is None
  for round_num, values in ((2, [2, 2, 1, 1]), (3, [3, 3, 3, 3])):
    copy = tmp_path / f'copy_{round_num}'
    shutil.copytree(tmp_path, copy, ignore=shutil.ignore_patterns('copy_*'))
    assert _small_counters(copy, round_num) == values


def test_restore_refuses_to_roll_back_past_a_merge(tmp_path):
  store = _small_store(tmp_path)
  for round_num in range(1, 4):
    store.update(_SMALL_IDS, [_small(round_num)] * 4)
    _checkpoint(store, round_num)  # Nothing else kept: merges up to t.
  store.close()

  with pytest.raises(ValueError, match='round 3, newer than .* round 2'):
    _restore(tmp_path, 2, template=_small(0), client_ids=_SMALL_IDS)


def test_a_damaged_row_is_an_error_when_read(tmp_path):
  store = _create(tmp_path)
  store.update(['client_3'], [_state(3)])
  _checkpoint(store, 1)
  store.close()
  with open(os.path.join(tmp_path, 'leaf_0.bin'), 'r+b') as f:
    f.seek(3 * ROW_BYTES + 100)
    f.write(b'\x01')
  store = _restore(tmp_path, 1)

  with pytest.raises(
      client_state_spec.DamagedClientStatesError,
      match="state of 'client_3' .* is damaged",
  ):
    store.get(['client_2', 'client_3'])
  store.close()


def test_restore_without_the_checkpoints_segment_raises(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.close()

  with pytest.raises(FileNotFoundError, match='round 2 are missing'):
    _restore(tmp_path, 2)


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(template=_template((7,))), 'template'),
        (dict(client_ids=IDS[:999]), 'population'),
        (dict(client_ids=IDS[::-1]), 'population'),
        (dict(owner='another run'), 'belong'),
    ],
)
def test_restore_refuses_a_store_made_for_something_else(
    tmp_path, kwargs, message
):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.close()

  with pytest.raises(ValueError, match=message):
    _restore(tmp_path, 0, **kwargs)


def test_an_open_store_locks_its_directory(tmp_path):
  store = _create(tmp_path)

  with pytest.raises(ValueError, match='in use by another run'):
    _create(tmp_path)
  store.close()
  _create(tmp_path).close()


def test_create_refuses_a_directory_with_other_files(tmp_path):
  (tmp_path / 'notes.txt').write_text('mine')

  with pytest.raises(ValueError, match=r'notes\.txt'):
    _create(tmp_path)
  assert (tmp_path / 'notes.txt').read_text() == 'mine'


def test_create_replaces_an_old_store_and_keeps_its_states(tmp_path):
  directory = tmp_path / 'store'
  store = _create(directory)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(4)])
  _checkpoint(store, 1)
  store.close()
  before = {
      str(p.relative_to(directory)): p.read_bytes()
      for p in directory.rglob('*')
      if p.is_file() and p.name != '.lock'
  }

  store = _create(directory, run_dir=str(tmp_path))

  assert _counters(store, ['client_1']) == [0]
  store.close()
  # The replaced store's files (segment 1 holds client_1's state 4) are in
  # damaged/, not deleted.
  (kept,) = (tmp_path / 'damaged').iterdir()
  assert kept.name.startswith('client_states-')
  assert {
      str(p.relative_to(kept)): p.read_bytes()
      for p in kept.rglob('*')
      if p.is_file()
  } == before
  assert 'segment_1/index.bin' in before


def test_create_over_a_store_of_round_0_keeps_nothing(tmp_path):
  store = _create(tmp_path / 'store')
  _checkpoint(store, 0)
  store.close()

  _create(tmp_path / 'store', run_dir=str(tmp_path)).close()

  assert not (tmp_path / 'damaged').exists()


def test_a_format_1_store_is_refused_on_restore_and_replaced_by_create(
    tmp_path,
):
  # The files a store of tff_fedwin before 2026-12-03 left (format 1).
  (tmp_path / 'manifest.json').write_text(
      json.dumps(dict(format_version=1, owner='run'))
  )
  for name in ('applied.json', 'created.bin', 'leaf_0.bin', 'leaf_1.bin'):
    (tmp_path / name).write_bytes(b'{}')
  for name in ('undo_2', 'delta_4', 'undo_6.tmp'):
    (tmp_path / name).mkdir()

  with pytest.raises(ValueError, match='format version 1, expected 2'):
    _restore(tmp_path, 4)
  store = _create(tmp_path)
  store.close()

  assert sorted(os.listdir(tmp_path)) == [
      '.lock',
      'base.bin',
      'leaf_0.bin',
      'leaf_1.bin',
      'manifest.json',
  ]


def test_create_refuses_the_store_of_another_run(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(4)])
  _checkpoint(store, 1)
  store.close()

  with pytest.raises(ValueError, match="run of 'run', not 'other'"):
    _create(tmp_path, owner='other')
  restored = _restore(tmp_path, 1)
  assert _counters(restored, ['client_1']) == [4]
  restored.close()


def test_files_are_private(tmp_path):
  directory = tmp_path / 'states'
  store = _create(directory)
  _checkpoint(store, 0)

  assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
  store.update(['client_1'], [_state(1)])
  _checkpoint(store, 1)
  for name in ('leaf_0.bin', 'base.bin', 'manifest.json', 'segment_1'):
    mode = 0o700 if name.startswith('segment') else 0o600
    assert stat.S_IMODE(os.stat(directory / name).st_mode) == mode, name
  for name in os.listdir(directory / 'segment_1'):
    path = directory / 'segment_1' / name
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, name
  store.close()


@pytest.mark.parametrize('method', ['get', 'update'])
def test_get_and_update_wait_for_finish_checkpoint(tmp_path, method):
  store = _create(tmp_path)
  store.prepare_checkpoint(0)

  with pytest.raises(ValueError, match=r'finish_checkpoint\(0\)'):
    if method == 'get':
      store.get(['client_1'])
    else:
      store.update(['client_1'], [_state(1)])
  store.close()


def test_unknown_client_id_names_the_population(tmp_path):
  store = _create(tmp_path)

  with pytest.raises(ValueError, match=r"'stranger'.*1000 clients"):
    store.get(['stranger'])
  store.close()


def test_update_returns_while_it_writes_and_get_reads_those_states(
    tmp_path, monkeypatch
):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(1)])
  _checkpoint(store, 1)
  writing, release = threading.Event(), threading.Event()
  pwrite = row_files.pwrite

  def held_pwrite(*args):
    writing.set()
    # Were the writes in the caller's thread, `update` would wait here.
    assert release.wait(timeout=10), 'update waited for its writes'
    pwrite(*args)

  monkeypatch.setattr(row_files, 'pwrite', held_pwrite)
  store.update(['client_1', 'client_2'], [_state(5), _state(6)])
  assert writing.wait(timeout=10)

  got = store.get(['client_1', 'client_2', 'client_3'])

  assert [int(s['n']) for s in got] == [5, 6, 0]
  np.testing.assert_array_equal(got[1]['c'], np.full([2**18], 6, np.float32))
  got[0]['c'][:] = -1.0  # A copy: the state being written stays 5.
  release.set()
  _checkpoint(store, 2)
  store.close()
  store = _restore(tmp_path, 2)
  got = store.get(['client_1', 'client_2'])
  np.testing.assert_array_equal(got[0]['c'], np.full([2**18], 5, np.float32))
  assert [int(s['n']) for s in got] == [5, 6]
  store.close()


def test_a_write_on_a_full_disk_fails_the_checkpoint_and_every_later_call(
    tmpfs,
):
  directory = tmpfs / 'store'
  store = _create(directory, client_ids=IDS[:8])
  _checkpoint(store, 0)
  filler = full_disk.fill(str(tmpfs), 64 * 1024)
  # Two 1 MiB states into 64 KB: the writes' thread meets ENOSPC.
  store.update(['client_1', 'client_2'], [_state(1), _state(2)])

  with pytest.raises(OSError) as raised:
    store.prepare_checkpoint(1)
  assert raised.value.errno == errno.ENOSPC
  with pytest.raises(ValueError, match='An earlier write of client states'):
    store.get(['client_1'])
  with pytest.raises(ValueError, match='An earlier write of client states'):
    store.update(['client_3'], [_state(3)])
  store.close()
  # Nothing durable was lost: round 0's version reads the initial states.
  os.remove(filler)
  store = _restore(directory, 0, client_ids=IDS[:8])
  assert _counters(store, ['client_1', 'client_2']) == [0, 0]
  store.close()
