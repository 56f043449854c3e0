"""Tests of what only DiskClientStateStore has: files, deltas, crash points.

Behaviour shared with the memory store is in client_state_stores_test.py.
"""

import collections
import os
import stat

import numpy as np
import pytest

from tff_fedwin.training import disk_client_states

_Store = disk_client_states.DiskClientStateStore
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


def test_a_checkpoint_writes_only_the_clients_updated_since_the_last(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1', 'client_2'], [_state(1), _state(2)])
  _checkpoint(store, 1)
  store.update(['client_7'], [_state(7)])
  store.update(['client_7'], [_state(8)])  # Same slot, written again.

  store.prepare_checkpoint(2)

  delta = os.path.join(tmp_path, 'delta_2')
  np.testing.assert_array_equal(np.load(os.path.join(delta, 'rows.npy')), [7])
  assert os.path.getsize(os.path.join(delta, 'leaf_0.bin')) == ROW_BYTES
  assert os.path.getsize(os.path.join(delta, 'leaf_1.bin')) == 4
  store.finish_checkpoint(2)
  assert not os.path.exists(delta)
  assert _counters(store, ['client_1', 'client_2', 'client_7']) == [1, 2, 8]
  store.close()


def test_killed_after_delta_before_program_state_restores_the_older_round(
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

  assert _counters(restored, ['client_1', 'client_2']) == [1, 0]
  assert not os.path.exists(os.path.join(tmp_path, 'delta_2'))
  restored.close()


def test_killed_after_program_state_before_apply_completes_the_checkpoint(
    tmp_path,
):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1', 'client_2'], [_state(5), _state(6)])
  store.prepare_checkpoint(2)  # Program state 2 saved, then killed.
  store.close()

  restored = _restore(tmp_path, 2)

  assert _counters(restored, ['client_1', 'client_2', 'client_3']) == [5, 6, 0]
  restored.close()
  # The checkpoint is complete: restoring again needs no delta.
  assert not os.path.exists(os.path.join(tmp_path, 'delta_2'))
  again = _restore(tmp_path, 2)
  assert _counters(again, ['client_1', 'client_2']) == [5, 6]
  again.close()


def test_updates_after_the_last_checkpoint_are_dropped_on_restore(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(3)])
  store.close()  # Killed mid-round.

  restored = _restore(tmp_path, 0)

  assert _counters(restored, ['client_1']) == [0]
  assert not os.path.exists(os.path.join(tmp_path, 'pending'))
  restored.close()


def test_restore_refuses_to_roll_back_a_newer_checkpoint(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  _checkpoint(store, 3)
  store.close()

  with pytest.raises(ValueError, match='round 3, newer than .* round 2'):
    _restore(tmp_path, 2)


def test_restore_without_the_checkpoints_delta_raises(tmp_path):
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


def test_create_replaces_an_old_store(tmp_path):
  store = _create(tmp_path)
  _checkpoint(store, 0)
  store.update(['client_1'], [_state(4)])
  _checkpoint(store, 1)
  store.close()

  store = _create(tmp_path)

  assert _counters(store, ['client_1']) == [0]
  store.close()


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
  for name in ('leaf_0.bin', 'created.bin', 'manifest.json', 'applied.json'):
    assert stat.S_IMODE(os.stat(directory / name).st_mode) == 0o600, name
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
