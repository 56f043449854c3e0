"""Tests for tff_fedwin.training.disk_store_chain: a version checked unwritten.

A store of 6 clients checkpointed at rounds 2, 4, 6: c0 and c1 get their
first state in round 2 (written in place in the base file), c1 again in 4
and 6 (slots of segment_4 and segment_6). Each check must name the damage of
what the version needs, pass what it does not need, and leave every byte of
the store as it was.
"""

import collections
import os
import re
import zlib

import numpy as np
import pytest

from tests import file_trees
from tff_fedwin.training import client_state_spec
from tff_fedwin.training import disk_client_states
from tff_fedwin.training import disk_store_chain
from tff_fedwin.training import disk_store_layout as layout

_IDS = [f'c{i}' for i in range(6)]
_ROUNDS = ((2, [0, 1]), (4, [1, 2, 3]), (6, [0, 1, 4]))


def _template():
  return collections.OrderedDict(
      a=np.zeros([3], np.float32), b=np.zeros([2, 2], np.int32)
  )


def _state(value):
  return collections.OrderedDict(
      a=np.full([3], value, np.float32), b=np.full([2, 2], value, np.int32)
  )


def _listed(directory, round_num):
  """Version t's `client_states` entries, as the checkpoint manifest has them."""
  names = ['manifest.json', f'segment_{round_num}/index.bin']
  entries = {}
  for name in names:
    data = (directory / name).read_bytes()
    entries[name] = (len(data), zlib.crc32(data))
  return entries


@pytest.fixture(name='store_dir')
def _store_dir(tmp_path):
  """The store of the module docstring, with an update after round 6."""
  directory = tmp_path / 'store'
  store = disk_client_states.DiskClientStateStore.create(
      str(directory), _template(), _IDS, owner='run'
  )
  listed = {}
  for round_num, updated in _ROUNDS:
    store.update([_IDS[i] for i in updated], [_state(round_num)] * len(updated))
    store.prepare_checkpoint(round_num)
    store.finish_checkpoint(round_num, [0, 2, 4, 6])
    listed[round_num] = _listed(directory, round_num)
  store.update([_IDS[5]], [_state(7)])  # Pending: no version's.
  store.close()
  return directory, listed


def _flip(path, offset):
  data = bytearray(path.read_bytes())
  data[offset] ^= 0xFF
  path.write_bytes(bytes(data))


def test_every_intact_version_passes_and_nothing_is_written(store_dir):
  directory, listed = store_dir
  before = file_trees.tree_bytes(directory)

  for round_num in (2, 4, 6):
    assert (
        disk_store_chain.problem(str(directory), round_num, listed[round_num])
        is None
    )
  assert file_trees.tree_bytes(directory) == before


def test_a_damaged_slot_is_a_problem_of_the_versions_that_read_it(store_dir):
  directory, listed = store_dir
  # c1's round-4 state is slot 0 of segment_4; version 6 reads segment_6's.
  _flip(directory / 'segment_4' / 'leaf_0.bin', 0)
  before = file_trees.tree_bytes(directory)

  problems = {
      r: disk_store_chain.problem(str(directory), r, listed[r])
      for r in (2, 4, 6)
  }

  assert problems == {
      2: None,
      4: (
          f'the client state of row 1 in {directory / "segment_4"} does not '
          'match its CRC-32 (segment of round 4)'
      ),
      6: None,
  }
  assert file_trees.tree_bytes(directory) == before


def test_a_damaged_first_state_in_the_base_file_is_a_problem(store_dir):
  directory, listed = store_dir
  # c0's round-2 state is row 0 of the base files (its first state), read by
  # versions 2 and 4; version 6 has c0 in segment_6.
  _flip(directory / 'leaf_1.bin', 0)

  problems = {
      r: disk_store_chain.problem(str(directory), r, listed[r])
      for r in (2, 4, 6)
  }

  message = (
      f'the client state of row 0 in {directory} does not match its CRC-32 '
      '(segment of round 2)'
  )
  assert problems == {2: message, 4: message, 6: None}


def test_a_damaged_or_missing_index_breaks_the_versions_after_it(store_dir):
  directory, listed = store_dir
  _flip(directory / 'segment_4' / 'index.bin', 40)

  assert disk_store_chain.problem(str(directory), 2, listed[2]) is None
  assert disk_store_chain.problem(str(directory), 4, listed[4]) == (
      f'checksum mismatch of {directory / "segment_4" / "index.bin"}'
  )
  # Version 6 lists only its own index; its chain reads segment_4's.
  assert disk_store_chain.problem(str(directory), 6, listed[6]) == (
      'its client states cannot be restored '
      f'({directory / "segment_4" / "index.bin"} is damaged (CRC-32 mismatch '
      'or truncated))'
  )
  _flip(directory / 'segment_4' / 'index.bin', 40)  # Mended.
  os.remove(directory / 'segment_2' / 'index.bin')
  assert disk_store_chain.problem(str(directory), 6, listed[6]).startswith(
      'its client states are missing (the client states of the checkpoint '
      'of round 2 are missing'
  )


@pytest.mark.parametrize(
    'field, value, named',
    [
        ('rows', 99, 'names a row outside 0..5'),
        ('rows', -3, 'names a row outside 0..5'),
        ('slots', -7, r'names a negative slot \(-7\)'),
    ],
)
def test_an_index_entry_out_of_range_is_damage_of_its_versions(
    store_dir, field, value, named
):
  # segment_4's index rewritten with a valid CRC and listed as such (its
  # manifest vouches for it): its entry still names no row or slot.
  directory, listed = store_dir
  path = directory / 'segment_4' / 'index.bin'
  arrays = layout.read_checked(str(path))
  arrays[field] = arrays[field].copy()
  arrays[field][0] = value
  layout.write_checked(str(path), arrays)
  listed[4] = _listed(directory, 4)

  for round_num in (4, 6):
    problem = disk_store_chain.problem(
        str(directory), round_num, listed[round_num]
    )
    assert re.fullmatch(
        rf'its client states cannot be restored \(the index of round 4 in '
        rf'{re.escape(str(directory))} {named}\)',
        problem,
    ), problem
  assert disk_store_chain.problem(str(directory), 2, listed[2]) is None


def test_a_store_of_the_old_format_is_refused_not_damaged(store_dir):
  directory, listed = store_dir
  manifest = directory / 'manifest.json'
  manifest.write_text(
      manifest.read_text().replace('"format_version": 2', '"format_version": 1')
  )

  with pytest.raises(
      client_state_spec.ClientStatesError, match='format version 1, expected 2'
  ):
    disk_store_chain.problem(str(directory), 6, listed[6])
