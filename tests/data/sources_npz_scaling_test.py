"""Tests for tff_fedwin.data.sources: how `load_npz` converts the features."""

import logging

import numpy as np
import pytest

from tff_fedwin import data


def _write_features(tmp_path, x_train, x_test):
  path = str(tmp_path / 'data.npz')
  np.savez(
      path,
      x_train=x_train,
      y_train=np.zeros(len(x_train), np.int64),
      x_test=x_test,
      y_test=np.zeros(len(x_test), np.int64),
  )
  return path


@pytest.mark.parametrize('dtype', [np.uint8, np.int64, np.int16, np.uint16])
def test_load_npz_integer_features_within_255_are_divided_by_255(
    tmp_path, dtype
):
  path = _write_features(
      tmp_path, np.array([[0, 51, 255]], dtype), np.array([[51, 102, 0]], dtype)
  )
  (x_train, _), (x_test, _) = data.load_npz(path)
  assert x_train.dtype == np.float32 and x_test.dtype == np.float32
  np.testing.assert_allclose(x_train, [[0.0, 0.2, 1.0]], rtol=1e-6)
  np.testing.assert_allclose(x_test, [[0.2, 0.4, 0.0]], rtol=1e-6)


def test_load_npz_uint16_above_255_divides_both_splits_by_65535(tmp_path):
  # Train alone would fit [0, 255]; one divisor serves both splits.
  path = _write_features(
      tmp_path,
      np.array([[0, 255]], np.uint16),
      np.array([[65535, 13107]], np.uint16),
  )
  (x_train, _), (x_test, _) = data.load_npz(path)
  np.testing.assert_allclose(x_train, [[0.0, 255 / 65535]], rtol=1e-6)
  np.testing.assert_allclose(x_test, [[1.0, 0.2]], rtol=1e-6)


def test_load_npz_scaling_is_logged(tmp_path, caplog):
  path = _write_features(
      tmp_path, np.array([[0, 255]], np.uint8), np.array([[3, 4]], np.uint8)
  )
  with caplog.at_level(logging.INFO, logger='absl'):
    data.load_npz(path)
  lines = [r.getMessage() for r in caplog.records if 'scaled' in r.getMessage()]
  assert lines == [
      f'x_train, x_test in {path}: uint8 features scaled to '
      '[0, 1] (divided by 255)'
  ]


@pytest.mark.parametrize(
    'x_test',
    [np.array([[200, 7]], np.uint8), np.array([[300, -7]], np.int64)],
    ids=['uint8', 'int64_beyond_255'],
)
def test_load_npz_without_scaling_casts_integers_unchanged(tmp_path, x_test):
  path = _write_features(tmp_path, np.array([[0, 51]], x_test.dtype), x_test)
  (x_train, _), (x_test_loaded, _) = data.load_npz(
      path, scale_integer_features=False
  )
  assert x_train.dtype == np.float32 and x_test_loaded.dtype == np.float32
  np.testing.assert_array_equal(x_train, [[0.0, 51.0]])
  np.testing.assert_array_equal(x_test_loaded, x_test.astype(np.float32))


def test_load_npz_float_features_become_float32_unchanged(tmp_path):
  x_train = np.array([[-3.5, 300.25]], np.float64)
  path = _write_features(tmp_path, x_train, np.array([[0.5, 2.0]], np.float16))
  (x_train_loaded, _), (x_test, _) = data.load_npz(path)
  assert x_train_loaded.dtype == np.float32 and x_test.dtype == np.float32
  np.testing.assert_array_equal(x_train_loaded, [[-3.5, 300.25]])
  np.testing.assert_array_equal(x_test, [[0.5, 2.0]])


def test_load_npz_bool_features_become_zeros_and_ones(tmp_path):
  path = _write_features(
      tmp_path, np.array([[True, False]]), np.array([[False, True]])
  )
  (x_train, _), (x_test, _) = data.load_npz(path)
  assert x_train.dtype == np.float32
  np.testing.assert_array_equal(x_train, [[1.0, 0.0]])
  np.testing.assert_array_equal(x_test, [[0.0, 1.0]])
