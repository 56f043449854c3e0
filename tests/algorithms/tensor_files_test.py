"""Tensor files: the driver's format is the one TensorFlow writes and reads."""

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.algorithms import tensor_files

_DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_]
_SHAPES = [(), (0,), (7,), (9216, 128), (3, 3, 1, 32)]


def _values(dtype, shape):
  values = np.random.default_rng(0).normal(size=shape) * 100
  return np.asarray(values).astype(dtype)


def _serialized(array):
  return tf.io.serialize_tensor(tf.constant(array)).numpy()


@pytest.mark.parametrize('dtype', _DTYPES)
@pytest.mark.parametrize('shape', _SHAPES)
def test_expected_header_is_what_the_worker_writes(dtype, shape):
  # The driver's one-copy read applies only when a file starts with this
  # header; otherwise every file would take the slower protobuf parse.
  array = np.ones(shape, dtype)

  header = tensor_files.content_header(np.dtype(dtype), shape)

  assert _serialized(array) == header + array.tobytes()


@pytest.mark.parametrize('dtype', _DTYPES)
@pytest.mark.parametrize('shape', [(), (0,), (3, 4)])
def test_driver_writes_the_bytes_tensorflow_serializes(tmp_path, dtype, shape):
  array = _values(dtype, shape)
  path = str(tmp_path / 'leaf')

  tensor_files.write_tensor_file(path, array)

  with open(path, 'rb') as f:
    assert f.read() == _serialized(array)


def test_big_endian_array_is_written_as_its_values(tmp_path):
  array = np.array([1.5, -2.0, 3.25], '>f4')
  path = str(tmp_path / 'leaf')

  tensor_files.write_tensor_file(path, array)

  parsed = tf.io.parse_tensor(tf.io.read_file(path), tf.float32).numpy()
  np.testing.assert_array_equal(parsed, [1.5, -2.0, 3.25])


@pytest.mark.parametrize('dtype', _DTYPES)
def test_driver_reads_what_tensorflow_wrote(tmp_path, dtype):
  array = _values(dtype, (2, 3, 5))
  path = str(tmp_path / 'leaf')
  tf.io.write_file(path, tf.io.serialize_tensor(tf.constant(array)))

  got = tensor_files.read_tensor_file(path, np.zeros((2, 3, 5), dtype))

  assert got.dtype == array.dtype
  np.testing.assert_array_equal(got, array)


def test_empty_file_is_refused_naming_it(tmp_path):
  path = tmp_path / 'leaf'
  path.write_bytes(b'')

  with pytest.raises(ValueError, match='leaf is empty'):
    tensor_files.read_tensor_file(str(path), np.zeros(2, np.float32))
