"""Per-client states between the driver and the workers as files.

With `build_client_state_process(..., client_state_transfer='files')` a
sampled client's vector c_i does not travel as a TFF value (TFF 0.87 copies a
CLIENTS-placed value several times in the driver): the driver writes it to
files, the client's computation in the TFF worker reads them, runs the
client step and writes c_i+ next to them, and the driver reads that back.
Only a path (a string per client) crosses TFF's value serialization.

The inputs are one file per client and weight tensor, `<prefix>.in.<i>` (c_i),
the tensor's raw little-endian bytes, written by the driver straight from
numpy and read in the worker with `tf.io.decode_raw` (every floating dtype;
the process requires floating-point weights). c_i+ is the tensor bundle
`<prefix>.out` (`tensor_bundles`: written in the worker with `SaveV2`, every
leaf's checksum checked when the driver reads it). Both keep the bits of
the value path. The driver and every worker must see the same directory:
local workers (one machine) or a shared file system. Why, and the
measurements: docs/performance.md sec. 2.6.
"""

from collections.abc import Sequence
import contextlib
import os
import sys
from typing import Any

import numpy as np
import tensorflow as tf

from tff_fedwin.algorithms import tensor_bundles
from tff_fedwin.algorithms.client_state import types

# How client states reach the workers (`build_client_state_process`).
CLIENT_STATE_TRANSFERS = ('values', 'files')
_IN, _OUT = 'in', 'out'


def check_transfer(client_state_transfer: str) -> str:
  """`client_state_transfer` if allowed, else a ValueError naming the values."""
  if client_state_transfer not in CLIENT_STATE_TRANSFERS:
    raise ValueError(
        '`client_state_transfer` must be one of '
        f'{CLIENT_STATE_TRANSFERS}, got {client_state_transfer!r}.'
    )
  return client_state_transfer


def _input_path(prefix, i: int):
  """c_i's leaf i: `<prefix>.in.<i>` (`prefix` a str or a string tensor)."""
  return prefix + f'.{_IN}.{i}'


def _output_prefix(prefix):
  """c_i+'s bundle: `<prefix>.out` (`prefix` a str or a string tensor)."""
  return prefix + f'.{_OUT}'


def read_client_state(prefix: tf.Tensor, client_state_spec: Any) -> Any:
  """In the worker: the client's state from the raw bytes in
  `<prefix>.in.<i>` (TF ops).

  Args:
    prefix: A string scalar tensor, the client's file prefix.
    client_state_spec: The state's structure of `tf.TensorSpec`s (a
      `types.ClientState` or `RoundClientState` of specs).

  Returns:
    The state, `client_state_spec`'s structure of tensors with its dtypes and
    shapes.
  """
  leaves = [
      _read_raw(_input_path(prefix, i), spec)
      for i, spec in enumerate(tf.nest.flatten(client_state_spec))
  ]
  return tf.nest.pack_sequence_as(client_state_spec, leaves)


def _read_raw(path: tf.Tensor, spec: tf.TensorSpec) -> tf.Tensor:
  """The tensor of `spec` whose raw little-endian bytes are in `path`.

  The size is checked with `tf.ensure_shape`, which Grappler keeps: it drops
  a `tf.reshape` of a 1-D tensor as redundant (and an assertion depending on
  it), so a 1-D tensor of the wrong size would pass unchecked.
  """
  flat = tf.io.decode_raw(tf.io.read_file(path), spec.dtype, little_endian=True)
  flat = tf.ensure_shape(flat, [spec.shape.num_elements()])
  return tf.reshape(flat, spec.shape)


def write_client_state(prefix: tf.Tensor, state: Any) -> list[tf.Operation]:
  """In the worker: the op that writes the client's new state (every leaf)
  as the bundle `<prefix>.out`."""
  return [
      tensor_bundles.save_op(_output_prefix(prefix), tf.nest.flatten(state))
  ]


def write_inputs(prefixes: Sequence[str], states: Sequence[Any]) -> None:
  """In the driver: each client's c_i to `<prefix>.in.<i>`, and no c_i+.

  Writes each leaf's raw little-endian bytes (`read_client_state` reads
  them) over the file's old bytes in place (faster than recreating them,
  docs/performance.md sec. 2.6), and removes the index of the clients' c_i+
  bundles (`<prefix>.out.index`), so a round's outputs can only be that
  round's: `read_outputs` refuses a bundle without one.
  """
  for prefix, state in zip(prefixes, states, strict=True):
    leaves = tf.nest.flatten(state)
    with contextlib.suppress(FileNotFoundError):
      os.remove(_output_index(prefix))
    for i, leaf in enumerate(leaves):
      _overwrite(_input_path(prefix, i), _little_endian(np.asarray(leaf)))


def _overwrite(path: str, array: np.ndarray) -> None:
  """`path` holding exactly `array`'s bytes, written over the old ones."""
  fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
  with os.fdopen(fd, 'wb') as f:  # The open fd: no O_TRUNC.
    array.tofile(f)
    f.truncate()


def _little_endian(array: np.ndarray) -> np.ndarray:
  """`array`, byte-swapped to little-endian if it is stored big-endian."""
  order = array.dtype.byteorder
  if order == '>' or (order == '=' and sys.byteorder == 'big'):
    return array.astype(array.dtype.newbyteorder('<'))
  return array


def _output_index(prefix: str) -> str:
  return _output_prefix(prefix) + tensor_bundles.INDEX_SUFFIX


def read_outputs(
    prefixes: Sequence[str], like: types.ClientState
) -> list[types.ClientState]:
  """In the driver: each client's c_i+ from the bundle `<prefix>.out`.

  One copy per leaf (`tensor_bundles.read`), every leaf's checksum checked;
  the same bits as the value path.

  Args:
    prefixes: The clients' file prefixes, in round order.
    like: A client state (numpy) with the structure and dtypes to read.

  Returns:
    The clients' c_i+ as numpy arrays (0-d ones too).

  Raises:
    FileNotFoundError: Naming the file, if a client's bundle has no index:
      its computation did not write it since `write_inputs`.
    ValueError: Naming the bundle, if a leaf is missing, fails its
      checksum, or holds another dtype or shape than `like`'s leaf.
  """
  leaves = [np.asarray(leaf) for leaf in tf.nest.flatten(like)]
  states = []
  for prefix in prefixes:
    if not os.path.exists(_output_index(prefix)):
      raise FileNotFoundError(
          f'{_output_index(prefix)} does not exist: the client computation '
          'did not write its c_i+ since the inputs were written.'
      )
    read = tensor_bundles.read(_output_prefix(prefix), leaves)
    states.append(tf.nest.pack_sequence_as(like, [np.asarray(x) for x in read]))
  return states
