"""Tests for tff_fedwin.data.sources: `.npz` loading of valid files."""

import numpy as np
import pytest

from tests.data import sources_fixtures
from tff_fedwin import data

_npz_arrays = sources_fixtures.npz_arrays


def test_load_npz_round_trip(tmp_path):
  arrays = _npz_arrays()
  path = str(tmp_path / 'data.npz')
  np.savez(path, **arrays)
  (x_train, y_train), (x_test, y_test) = data.load_npz(path)
  for key, loaded in [
      ('x_train', x_train),
      ('y_train', y_train),
      ('x_test', x_test),
      ('y_test', y_test),
  ]:
    np.testing.assert_array_equal(loaded, arrays[key])
    assert loaded.dtype == arrays[key].dtype


@pytest.mark.parametrize('key', ['x_train', 'y_train', 'x_test', 'y_test'])
def test_load_npz_missing_key_names_key_and_file(tmp_path, key):
  arrays = _npz_arrays()
  del arrays[key]
  path = str(tmp_path / 'data.npz')
  np.savez(path, **arrays)
  with pytest.raises(ValueError, match=key) as error:
    data.load_npz(path)
  assert path in str(error.value)


@pytest.mark.parametrize('key', ['y_train', 'y_test'])
def test_load_npz_float_labels_raise(tmp_path, key):
  arrays = _npz_arrays()
  arrays[key] = arrays[key].astype(np.float32)
  path = str(tmp_path / 'data.npz')
  np.savez(path, **arrays)
  with pytest.raises(ValueError, match=f'{key}.*integer'):
    data.load_npz(path)


def test_load_npz_length_mismatch_raises(tmp_path):
  arrays = _npz_arrays()
  arrays['y_train'] = arrays['y_train'][:-1]
  path = str(tmp_path / 'data.npz')
  np.savez(path, **arrays)
  with pytest.raises(ValueError, match='x_train and y_train'):
    data.load_npz(path)


def test_load_npz_labels_of_shape_n_by_1_become_1d(tmp_path):
  arrays = _npz_arrays()
  arrays['y_train'] = arrays['y_train'][:, None]
  path = str(tmp_path / 'data.npz')
  np.savez(path, **arrays)
  (_, y_train), _ = data.load_npz(path)
  np.testing.assert_array_equal(y_train, [0, 1, 2, 0, 1, 2])
