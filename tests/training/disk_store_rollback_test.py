"""Tests for tff_fedwin.training.disk_store_rollback: a rollback unwritten.

The expected checksums are those of the store's files after a real rollback
(`DiskClientStateStore.restore`) of a copy of the directory; the check itself
must leave every file of the original as it was.
"""

import collections
import os
import shutil
import zlib

import numpy as np
import pytest

from tests import file_trees
from tff_fedwin.training import disk_client_states
from tff_fedwin.training import disk_store_rollback

_IDS = [f'c{i}' for i in range(6)]


def _template():
  return collections.OrderedDict(
      a=np.zeros([3], np.float32), b=np.zeros([2, 2], np.int32)
  )


def _state(value):
  return collections.OrderedDict(
      a=np.full([3], value, np.float32), b=np.full([2, 2], value, np.int32)
  )


def _checkpointed_store(directory):
  """Checkpoints 2, 4, 6 kept (undo logs back to 2); updates after 6.

  c1 is updated in rounds 2, 4 and 6: rolled back to 2, its row must come
  from undo_4 (its round-2 value), not undo_6 (its round-4 value).
  """
  store = disk_client_states.DiskClientStateStore.create(
      str(directory), _template(), _IDS, owner='run'
  )
  kept = []
  for round_num, updated in ((2, [0, 1]), (4, [1, 2, 3]), (6, [0, 1, 4])):
    store.update([_IDS[i] for i in updated], [_state(round_num)] * len(updated))
    store.prepare_checkpoint(round_num)
    kept.append(round_num)
    store.finish_checkpoint(round_num, [0, *kept])
  store.update([_IDS[5]], [_state(7)])  # Pending, dropped by a restore.
  store.close()


def _actual_checksums(directory, round_num, tmp_path):
  copy = tmp_path / f'copy_{round_num}'
  shutil.copytree(directory, copy)
  disk_client_states.DiskClientStateStore.restore(
      str(copy), _template(), _IDS, owner='run', round_num=round_num
  ).close()
  names = ['manifest.json', 'applied.json', 'created.bin', 'leaf_0.bin']
  names.append('leaf_1.bin')
  sums = {}
  for name in names:
    with open(copy / name, 'rb') as f:
      data = f.read()
    sums[os.path.join(str(directory), name)] = (len(data), zlib.crc32(data))
  return sums


@pytest.mark.parametrize('round_num', [2, 4, 6])
def test_checksums_are_those_of_a_real_rollback_and_nothing_is_written(
    tmp_path, round_num
):
  directory = tmp_path / 'store'
  _checkpointed_store(directory)
  before = file_trees.tree_bytes(directory)

  found = disk_store_rollback.rolled_back_checksums(str(directory), round_num)

  assert found == _actual_checksums(directory, round_num, tmp_path)
  assert file_trees.tree_bytes(directory) == before


def test_a_damaged_undo_log_is_a_problem_of_the_versions_before_it(tmp_path):
  directory = tmp_path / 'store'
  _checkpointed_store(directory)
  listed = {r: _actual_checksums(directory, r, tmp_path) for r in (2, 4, 6)}
  undo = directory / 'undo_6' / 'leaf_0.bin'  # Round 4's rows of c0, c1, c4.
  data = bytearray(undo.read_bytes())
  data[0] ^= 0xFF
  undo.write_bytes(bytes(data))
  before = file_trees.tree_bytes(directory)

  problems = {
      r: disk_store_rollback.problem(str(directory), r, listed[r])
      for r in (2, 4, 6)
  }

  assert problems[6] is None  # Round 6 needs no undo log.
  for r in (2, 4):
    assert problems[r] == (
        f'the client-state file {directory / "leaf_0.bin"} would not be as '
        'listed after the rollback (a damaged base file, undo log or delta)'
    )
  assert file_trees.tree_bytes(directory) == before


def test_a_round_the_undo_logs_do_not_reach_is_a_problem(tmp_path):
  directory = tmp_path / 'store'
  _checkpointed_store(directory)
  shutil.rmtree(directory / 'undo_4')  # 6 -> 4 still works, 4 -> 2 not.

  assert disk_store_rollback.problem(str(directory), 2, {}) == (
      'its client states cannot be rolled back (the client states in '
      f'{directory} are those of round 4 and no undo log goes back to round '
      '2)'
  )
