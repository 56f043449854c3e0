"""Tests for tff_fedwin.training.seeded_data_source.

The expected selections are numpy written here from the documented rule (the
j-th selection of k ids: `np.random.default_rng([seed, j]).choice(n, k,
replace=False)` indexes the ids), not read from the module.
"""

import asyncio

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_fedwin.training import SeededClientIdDataSource
from tff_fedwin.training import seeded_data_source

IDS = [f'client_{i:02d}' for i in range(20)]


def _expected(seed, j, k, ids=IDS):
  indices = np.random.default_rng([seed, j]).choice(len(ids), k, replace=False)
  return [ids[i] for i in indices]


def test_the_jth_selection_is_the_numpy_draw_of_seed_and_j():
  iterator = SeededClientIdDataSource(IDS, seed=7).iterator()

  got = [iterator.select(5) for _ in range(3)] + [iterator.select(20)]

  assert got == [_expected(7, j, 5) for j in (1, 2, 3)] + [_expected(7, 4, 20)]
  assert len(set(got[0])) == 5  # Without replacement within a selection.
  assert sorted(got[3]) == IDS  # All 20: a permutation.


def test_two_iterators_agree_and_another_seed_differs():
  same = [SeededClientIdDataSource(IDS, seed=3).iterator() for _ in range(2)]
  other = SeededClientIdDataSource(IDS, seed=4).iterator()

  a, b, c = ([it.select(6) for _ in range(4)] for it in (*same, other))

  assert a == b
  assert a != c  # 4 draws of 6 of 20 ids: equal only by a ~1e-28 chance.


def test_a_restored_iterator_continues_the_sequence():
  iterator = SeededClientIdDataSource(IDS, seed=11).iterator()
  iterator.select(4)
  iterator.select(4)

  restored = seeded_data_source.SeededClientIdDataSourceIterator.from_bytes(
      iterator.to_bytes()
  )

  assert restored == iterator
  assert restored.select(4) == _expected(11, 3, 4)
  assert restored != iterator  # One selection ahead now.


def test_tff_program_state_manager_saves_and_restores_the_iterator(tmp_path):
  # As train_model does: the iterator inside a ProgramState, loaded with a
  # fresh iterator as the structure.
  source = SeededClientIdDataSource(IDS, seed=2)
  iterator = source.iterator()
  iterator.select(3)
  manager = tff.program.FileProgramStateManager(str(tmp_path))
  state = tff.learning.programs.ProgramState(np.int32(1), 1, 0, iterator)

  async def save_and_load():
    await manager.save(state, 1)
    structure = tff.learning.programs.ProgramState(
        np.int32(0), 0, 0, source.iterator()
    )
    return await manager.load(1, structure)

  loaded = asyncio.run(save_and_load())

  assert loaded.data_iterator == iterator
  assert loaded.data_iterator.select(3) == _expected(2, 2, 3)


def test_federated_type_is_that_of_tffs_client_id_source():
  ours = SeededClientIdDataSource(IDS)
  tffs = tff.program.ClientIdDataSource(IDS)

  assert ours.federated_type == tffs.federated_type
  assert ours.iterator().federated_type == tffs.iterator().federated_type


@pytest.mark.parametrize('k', [0, 21, -1, None, 2.0, True])
def test_select_refuses_a_bad_k(k):
  with pytest.raises(
      ValueError, match=r'^`k` must be an integer >= 1 and <= 20, got '
  ):
    SeededClientIdDataSource(IDS).iterator().select(k)


@pytest.mark.parametrize(
    'client_ids, seed, error, match',
    [
        ([], 0, ValueError, '`client_ids` must not be empty'),
        ('abc', 0, TypeError, '`client_ids` must be a sequence of str'),
        ([1, 2], 0, TypeError, '`client_ids` must hold str only'),
        (IDS, -1, ValueError, r'`seed` must be an integer >= 0, got -1\.'),
        (IDS, 1.5, ValueError, r'`seed` must be an integer >= 0, got 1\.5\.'),
    ],
)
def test_bad_arguments_are_refused(client_ids, seed, error, match):
  with pytest.raises(error, match=match):
    SeededClientIdDataSource(client_ids, seed=seed)
