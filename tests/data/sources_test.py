"""Tests for tff_fedwin.data.sources: offline MNIST and `.npz` loading."""

import logging
import re

import numpy as np
import pytest

from tff_fedwin import data

# Per-class counts of the official MNIST test set (LeCun et al.), and the first
# labels of the official training and test files: the 50k train split of
# mnist.pkl.gz is the first 50k of the official training set.
_MNIST_TEST_CLASS_COUNTS = [
    980,
    1135,
    1032,
    1010,
    982,
    892,
    958,
    1028,
    974,
    1009,
]
_MNIST_FIRST_TRAIN_LABELS = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
_MNIST_FIRST_TEST_LABELS = [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]


@pytest.fixture(scope='module')
def mnist():
  (x_train, y_train), (x_test, y_test) = data.load_mnist()
  return dict(train=(x_train, y_train), test=(x_test, y_test))


@pytest.mark.parametrize('split, size', [('train', 50000), ('test', 10000)])
def test_mnist_shapes_and_dtypes(mnist, split, size):
  x, y = mnist[split]
  assert x.shape == (size, 28, 28, 1)
  assert x.dtype == np.float32
  assert y.shape == (size,)
  assert y.dtype == np.int32


@pytest.mark.parametrize('split', ['train', 'test'])
def test_mnist_pixels_in_unit_interval(mnist, split):
  x, _ = mnist[split]
  assert x.min() == 0.0
  assert 0.9 < x.max() <= 1.0


@pytest.mark.parametrize('split', ['train', 'test'])
def test_mnist_labels_are_digits(mnist, split):
  _, y = mnist[split]
  assert set(np.unique(y).tolist()) == set(range(10))


@pytest.mark.parametrize(
    'split, first_labels',
    [('train', _MNIST_FIRST_TRAIN_LABELS), ('test', _MNIST_FIRST_TEST_LABELS)],
)
def test_mnist_splits_are_the_official_ones(mnist, split, first_labels):
  _, y = mnist[split]
  np.testing.assert_array_equal(y[:10], first_labels)


def test_mnist_test_split_has_official_class_counts(mnist):
  _, y = mnist['test']
  np.testing.assert_array_equal(
      np.bincount(y, minlength=10), _MNIST_TEST_CLASS_COUNTS
  )


def _npz_arrays():
  rng = np.random.default_rng(0)
  return dict(
      x_train=rng.normal(size=[6, 3]).astype(np.float32),
      y_train=np.array([0, 1, 2, 0, 1, 2], np.int64),
      x_test=rng.normal(size=[2, 3]).astype(np.float32),
      y_test=np.array([2, 0], np.int64),
  )


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
  with pytest.raises(ValueError) as error:
    data.load_npz(path)
  assert key in str(error.value)
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


# Bad `.npz` inputs. Each case edits `_npz_arrays()` (or writes the file
# itself), and gives the array the message must name (None for a fault of the
# whole file) and a regex of what is wrong.


def _truncated(path):
  np.savez(path, **_npz_arrays())
  with open(path, 'rb') as f:
    content = f.read()
  with open(path, 'wb') as f:
    f.write(content[: len(content) // 2])


def _write_bytes(content):
  def write(path):
    with open(path, 'wb') as f:
      f.write(content)

  return write


def _npy(path):
  with open(path, 'wb') as f:
    np.save(f, np.zeros([3, 2], np.float32))


def _edit(**changes):
  """Writes `_npz_arrays()` with the arrays `changes` maps to functions."""

  def write(path):
    arrays = _npz_arrays()
    for key, change in changes.items():
      arrays[key] = change(arrays[key])
    np.savez(path, **arrays)

  return write


def _set(value):
  return lambda _: value


_BAD_NPZ_CASES = [
    pytest.param(None, None, 'no such file', id='missing_file'),
    pytest.param(
        _write_bytes(b'x_train,y_train\n1,2\n'),
        None,
        'not a readable .npz',
        id='text_file',
    ),
    pytest.param(
        _write_bytes(b''), None, 'not a readable .npz', id='empty_file'
    ),
    pytest.param(_truncated, None, 'not a readable .npz', id='truncated_zip'),
    pytest.param(_npy, None, 'single .npy array', id='npy_not_npz'),
    pytest.param(
        _edit(x_train=lambda x: np.array([{'pixels': v} for v in x], object)),
        'x_train',
        'cannot read.*pickle',
        id='object_array',
    ),
    pytest.param(
        _edit(x_train=lambda x: x[:0], y_train=lambda y: y[:0]),
        'x_train',
        'no examples',
        id='empty_train',
    ),
    pytest.param(
        _edit(x_test=lambda x: x[:0], y_test=lambda y: y[:0]),
        'x_test',
        'no examples',
        id='empty_test',
    ),
    pytest.param(
        _edit(x_train=lambda x: x.astype(str)),
        'x_train',
        'must be numbers.*<U',
        id='string_features',
    ),
    pytest.param(
        _edit(x_test=lambda x: x.astype(np.complex64)),
        'x_test',
        'must be numbers.*complex64',
        id='complex_features',
    ),
    pytest.param(
        _edit(x_train=lambda x: np.where(x > 0, np.nan, x)),
        'x_train',
        'NaN or infinite',
        id='nan_features',
    ),
    pytest.param(
        _edit(x_test=lambda x: np.where(x > 0, np.inf, x)),
        'x_test',
        'NaN or infinite',
        id='inf_features',
    ),
    pytest.param(
        _edit(x_test=lambda x: np.full(x.shape, 1e300)),
        'x_test',
        'NaN or infinite.*float32',
        id='float64_overflowing_float32',
    ),
    pytest.param(
        _edit(y_train=lambda y: y.astype(np.float32)),
        'y_train',
        'must be integers.*float32',
        id='float_labels',
    ),
    pytest.param(
        _edit(y_test=lambda y: y.astype(bool)),
        'y_test',
        'must be integers.*bool',
        id='bool_labels',
    ),
    pytest.param(
        _edit(y_train=lambda y: y - 1),
        'y_train',
        'negative label.*-1',
        id='negative_labels',
    ),
    pytest.param(
        _edit(y_test=lambda y: np.stack([y, y], axis=1)),
        'y_test',
        r'one class id per example.*\(2, 2\)',
        id='2d_labels',
    ),
    pytest.param(
        _edit(y_train=lambda y: y[:-1]),
        'y_train',
        r'same number of examples.*\(6, 3\) and \(5,\)',
        id='length_mismatch',
    ),
    pytest.param(
        _edit(y_test=_set(np.array([2, 3], np.int64))),
        'y_test',
        r'label\(s\) 3 not among the classes in y_train',
        id='test_label_above_train_classes',
    ),
    pytest.param(
        _edit(
            y_train=_set(np.array([0, 2, 0, 2, 0, 2], np.int64)),
            y_test=_set(np.array([1, 2], np.int64)),
        ),
        'y_test',
        r'label\(s\) 1 not among the classes in y_train.*0, 2',
        id='test_label_missing_from_train',
    ),
    pytest.param(
        _edit(x_test=_set(np.zeros([2, 4], np.float32))),
        'x_test',
        r'differ in shape.*\(3,\) vs \(4,\)',
        id='example_shapes',
    ),
    pytest.param(
        _edit(
            x_train=_set(np.full([6, 3], 300, np.int64)),
            x_test=_set(np.zeros([2, 3], np.int64)),
        ),
        'x_train',
        r'int64.*\[0, 300\].*scale_integer_features=False',
        id='int64_above_255',
    ),
    pytest.param(
        _edit(
            x_train=lambda x: (x * 10).astype(np.int8),
            x_test=lambda x: (x * 10).astype(np.int8),
        ),
        'x_test',
        'int8.*cannot be scaled',
        id='negative_integers',
    ),
    pytest.param(
        _edit(x_test=lambda x: np.zeros(x.shape, np.uint8)),
        'x_test',
        'float32/uint8.*mix integers',
        id='float_train_integer_test',
    ),
]


@pytest.mark.parametrize('write, array, problem', _BAD_NPZ_CASES)
def test_load_npz_bad_input_raises_one_line_value_error(
    tmp_path, write, array, problem
):
  path = str(tmp_path / 'data.npz')
  if write is not None:
    write(path)
  with pytest.raises(ValueError) as error:
    data.load_npz(path)
  message = str(error.value)
  assert '\n' not in message
  assert path in message
  if array is not None:
    assert array in message
  assert re.search(problem, message), message
  # Only the ValueError is shown: no chained numpy or zipfile traceback.
  assert error.value.__cause__ is None
  assert error.value.__context__ is None or error.value.__suppress_context__


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
