"""Tests for tff_fedwin.data.sources: `.npz` inputs `load_npz` refuses."""

import numpy as np
import pytest

from tests.data import sources_fixtures
from tff_fedwin import data

_npz_arrays = sources_fixtures.npz_arrays


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
  with pytest.raises(ValueError, match=problem) as error:
    data.load_npz(path)
  message = str(error.value)
  assert '\n' not in message
  assert path in message
  if array is not None:
    assert array in message
  # Only the ValueError is shown: no chained numpy or zipfile traceback.
  assert error.value.__cause__ is None
  assert error.value.__context__ is None or error.value.__suppress_context__
