"""The client state files' format: the driver's raw inputs, read in a graph."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.algorithms.client_state import state_files
from tff_fedwin.algorithms.client_state import types

# Unsigned integers of each width, to compare floats bit for bit.
_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _special_values(dtype, shape, seed):
  """Random values of `shape`, with -0.0, +-inf and NaN where there is room."""
  values = np.asarray(np.random.default_rng(seed).normal(size=shape))
  values = values.astype(dtype)
  flat = values.reshape(-1)
  specials = np.array([-0.0, np.inf, -np.inf, np.nan], dtype)
  flat[: min(flat.size, specials.size)] = specials[: flat.size]
  return values


def _read_in_graph(prefix, like):
  """The worker's c_i (`read_client_state` in a graph) for leaves `like`."""
  spec = types.ClientState(
      [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in like]
  )
  read = tf.function(lambda p: state_files.read_client_state(p, spec))
  return [t.numpy() for t in read(tf.constant(prefix)).control_variate]


def _write_outputs_in_graph(prefix, leaves):
  """The worker's c_i+ files (`write_client_state` in a graph)."""

  @tf.function
  def write(p, *tensors):
    state_files.write_client_state(p, types.ClientState(list(tensors)))

  write(tf.constant(prefix), *[tf.constant(x) for x in leaves])


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_worker_reads_the_bits_the_driver_wrote(tmp_path, dtype):
  leaves = [
      _special_values(dtype, shape, seed)
      for seed, shape in enumerate([(), (0,), (7,), (3, 4), (2, 3, 5)])
  ]
  prefix = str(tmp_path / 'client0')

  state_files.write_inputs([prefix], [types.ClientState(leaves)])
  read = _read_in_graph(prefix, leaves)

  bits = _BITS[np.dtype(dtype).itemsize]
  for got, expected in zip(read, leaves, strict=True):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(bits), expected.view(bits))


def test_big_endian_input_reads_as_its_values(tmp_path):
  # 1.5 is 0x3FC00000 as float32: stored big-endian its bytes are reversed,
  # so reading them unswapped would give another number.
  big = np.array([1.5, -2.25, 3.0], dtype='>f4')
  prefix = str(tmp_path / 'client0')

  state_files.write_inputs([prefix], [types.ClientState([big])])
  (read,) = _read_in_graph(prefix, [big.astype(np.float32)])

  np.testing.assert_array_equal(read, [1.5, -2.25, 3.0])


def test_inputs_file_holds_only_the_raw_little_endian_bytes(tmp_path):
  leaf = np.arange(6, dtype=np.float32).reshape(2, 3)
  prefix = str(tmp_path / 'client0')

  state_files.write_inputs([prefix], [types.ClientState([leaf])])

  with open(f'{prefix}.in.0', 'rb') as f:
    assert f.read() == leaf.astype('<f4').tobytes()


def test_write_inputs_removes_last_rounds_output_index(tmp_path):
  prefix = str(tmp_path / 'client0')
  _write_outputs_in_graph(prefix, [np.ones(2, np.float32)])
  assert os.path.exists(f'{prefix}.out.index')

  state_files.write_inputs(
      [prefix], [types.ClientState([np.zeros(2, np.float32)])]
  )

  assert not os.path.exists(f'{prefix}.out.index')
  assert os.path.getsize(f'{prefix}.in.0') == 8  # 2 float32 values


def test_inputs_written_over_a_longer_file_hold_only_the_new_bytes(tmp_path):
  prefix = str(tmp_path / 'client0')
  with open(f'{prefix}.in.0', 'wb') as f:
    f.write(b'x' * 100)
  leaf = np.array([1.0, -2.0], np.float32)

  state_files.write_inputs([prefix], [types.ClientState([leaf])])

  with open(f'{prefix}.in.0', 'rb') as f:
    assert f.read() == leaf.astype('<f4').tobytes()


@pytest.mark.parametrize(
    'written,expected', [((5,), (6,)), ((11,), (3, 4)), ((2,), ())]
)
def test_wrong_size_input_fails_in_the_worker(tmp_path, written, expected):
  prefix = str(tmp_path / 'client0')
  state_files.write_inputs(
      [prefix], [types.ClientState([np.zeros(written, np.float32)])]
  )

  with pytest.raises(tf.errors.InvalidArgumentError, match='not compatible'):
    _read_in_graph(prefix, [np.zeros(expected, np.float32)])


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_driver_reads_the_bits_the_worker_wrote(tmp_path, dtype):
  leaves = [
      _special_values(dtype, shape, seed)
      for seed, shape in enumerate([(), (0,), (7,), (3, 4), (2, 3, 5)])
  ]
  prefix = str(tmp_path / 'client0')
  _write_outputs_in_graph(prefix, leaves)

  (state,) = state_files.read_outputs(
      [prefix], types.ClientState([np.zeros_like(x) for x in leaves])
  )

  bits = _BITS[np.dtype(dtype).itemsize]
  for got, expected in zip(state.control_variate, leaves, strict=True):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(bits), expected.view(bits))


@pytest.mark.parametrize(
    'written, message',
    [
        (np.zeros((2, 3), np.float64), 'float64 of shape'),
        (np.zeros((3, 2), np.float32), r'float32 of shape \(3, 2\)'),
    ],
)
def test_output_of_another_dtype_or_shape_names_the_bundle(
    tmp_path, written, message
):
  prefix = str(tmp_path / 'client0')
  _write_outputs_in_graph(prefix, [written])

  with pytest.raises(ValueError, match=f'client0.out is {message}'):
    state_files.read_outputs(
        [prefix], types.ClientState([np.zeros((2, 3), np.float32)])
    )


def test_missing_output_raises_file_not_found_naming_it(tmp_path):
  with pytest.raises(FileNotFoundError, match='client0.out.index'):
    state_files.read_outputs(
        [str(tmp_path / 'client0')],
        types.ClientState([np.zeros(2, np.float32)]),
    )


def test_output_of_last_round_is_refused_after_write_inputs(tmp_path):
  # A client computation that ran last round but not since: its c_i+ data
  # file is still there, its index removed by this round's write_inputs.
  prefix = str(tmp_path / 'client0')
  like = types.ClientState([np.zeros(2, np.float32)])
  _write_outputs_in_graph(prefix, [np.ones(2, np.float32)])
  state_files.write_inputs([prefix], [like])

  with pytest.raises(FileNotFoundError, match='client0.out.index'):
    state_files.read_outputs([prefix], like)


def test_output_whose_bytes_changed_is_refused(tmp_path):
  # One bit of the data file flipped after the worker wrote it: the leaf's
  # CRC32C in the index no longer matches.
  prefix = str(tmp_path / 'client0')
  _write_outputs_in_graph(prefix, [np.arange(4, dtype=np.float32)])
  with open(f'{prefix}.out.data-00000-of-00001', 'r+b') as f:
    f.seek(-1, os.SEEK_END)
    last = f.read(1)[0]
    f.seek(-1, os.SEEK_END)
    f.write(bytes([last ^ 1]))

  with pytest.raises(ValueError, match='client0.out cannot be read'):
    state_files.read_outputs(
        [prefix], types.ClientState([np.zeros(4, np.float32)])
    )
