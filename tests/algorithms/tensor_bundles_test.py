"""Tensor bundles: what the driver writes a graph reads, and back, bit for bit."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.algorithms import tensor_bundles

_DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_]
_SHAPES = [(), (0,), (7,), (3, 3, 1, 32)]


def _arrays():
  rng = np.random.default_rng(0)
  return [
      np.asarray(rng.normal(size=shape) * 100).astype(dtype)
      for dtype in _DTYPES
      for shape in _SHAPES
  ]


def _specs(arrays):
  return [tf.TensorSpec(a.shape, a.dtype) for a in arrays]


def _assert_same_bits(actual, expected):
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    assert np.asarray(a).dtype == e.dtype and np.shape(a) == e.shape
    np.testing.assert_array_equal(a, e)


def test_a_graph_reads_what_the_driver_wrote(tmp_path):
  arrays = _arrays()
  prefix = str(tmp_path / 'state')
  tensor_bundles.write(prefix, arrays)

  @tf.function
  def restore(p):
    return tensor_bundles.restore(p, _specs(arrays))

  _assert_same_bits([t.numpy() for t in restore(tf.constant(prefix))], arrays)


def test_the_driver_reads_what_a_graph_wrote(tmp_path):
  arrays = _arrays()
  prefix = str(tmp_path / 'state')

  @tf.function
  def save(p, tensors):
    tensor_bundles.save_op(p, tensors)

  save(tf.constant(prefix), [tf.constant(a) for a in arrays])

  read = tensor_bundles.read(prefix, arrays)
  _assert_same_bits(read, arrays)
  # 0-d tensors come back as numpy scalars, the others as new arrays.
  assert all(
      np.isscalar(r) if a.ndim == 0 else isinstance(r, np.ndarray)
      for r, a in zip(read, arrays)
  )


def test_the_drivers_files_are_private(tmp_path):
  prefix = str(tmp_path / 'state')
  tensor_bundles.write(prefix, [np.ones((2,), np.float32)])

  names = sorted(os.listdir(tmp_path))
  assert names == ['state' + tensor_bundles.DATA_SUFFIX, 'state.index']
  assert all((tmp_path / n).stat().st_mode & 0o777 == 0o600 for n in names)


def test_a_graph_refuses_a_tensor_of_another_shape(tmp_path):
  prefix = str(tmp_path / 'state')
  tensor_bundles.write(prefix, [np.ones((2, 3), np.float32)])

  @tf.function
  def restore(p):
    return tensor_bundles.restore(p, [tf.TensorSpec((3, 2), tf.float32)])

  with pytest.raises(
      tf.errors.InvalidArgumentError,
      match=r'(?s)Shape of tensor RestoreV2 \[2,3\] is not compatible with '
      r'expected shape \[3,2\]',
  ):
    restore(tf.constant(prefix))


def _flip_last_data_byte(prefix):
  with open(prefix + tensor_bundles.DATA_SUFFIX, 'r+b') as f:
    f.seek(-1, os.SEEK_END)
    last = f.read(1)
    f.seek(-1, os.SEEK_END)
    f.write(bytes([last[0] ^ 0xFF]))


@pytest.mark.parametrize(
    'like, damage, message',
    [
        (np.ones((4,), np.float64), None, 'float32 of shape \\(4,\\); float64'),
        (
            np.ones((2, 2), np.float32),
            None,
            'float32 of shape \\(4,\\); float32',
        ),
        (np.ones((4,), np.float32), _flip_last_data_byte, 'cannot be read'),
        (np.ones((4,), np.float32), os.remove, 'No tensor bundle'),
    ],
    ids=['dtype', 'shape', 'checksum', 'missing'],
)
def test_the_driver_refuses_a_bad_bundle_naming_it(
    tmp_path, like, damage, message
):
  prefix = str(tmp_path / 'state')
  tensor_bundles.write(prefix, [np.arange(4, dtype=np.float32)])
  if damage is os.remove:
    os.remove(prefix + '.index')
  elif damage is not None:
    damage(prefix)

  with pytest.raises(ValueError, match=message) as raised:
    tensor_bundles.read(prefix, [like])
  assert prefix in str(raised.value)


def test_the_driver_refuses_a_bundle_with_too_few_tensors(tmp_path):
  prefix = str(tmp_path / 'state')
  tensor_bundles.write(prefix, [np.zeros((1,), np.int32)])

  with pytest.raises(ValueError, match='has no tensor 1'):
    tensor_bundles.read(prefix, [np.zeros((1,), np.int32)] * 2)
