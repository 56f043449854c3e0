"""Tensors as files of serialized `TensorProto`s, read and written by the driver.

A TFF worker writes a tensor to a file with `tf.io.serialize_tensor` and
`tf.io.write_file` (TensorFlow has no op that writes a tensor's raw bytes) and
reads one back with `tf.io.parse_tensor`. The driver reads and writes the same
format with numpy, one copy each way: a serialized `TensorProto` of a numeric
dtype is a fixed header (dtype, shape, the length of `tensor_content`) followed
by the tensor's raw little-endian bytes, the last field written
(`content_header`). Used for SCAFFOLD's c_i+ (`scaffold.state_files`) and the
server state kept in worker-side files (`resident_state`).
"""

import functools
import os

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2


@functools.lru_cache(maxsize=None)
def content_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
  """The bytes of a serialized `TensorProto` of `dtype` and `shape` that
  precede its `tensor_content` (the content is the last field written)."""
  proto = tensor_pb2.TensorProto(
      dtype=tf.as_dtype(dtype).as_datatype_enum,
      tensor_shape=tf.TensorShape(shape).as_proto(),
      tensor_content=bytes(int(np.prod(shape)) * dtype.itemsize),
  )
  serialized = proto.SerializeToString()
  return serialized[: len(serialized) - len(proto.tensor_content)]


def read_tensor_file(path: str, like: np.ndarray) -> np.ndarray:
  """The array in the serialized `TensorProto` at `path`, checked vs `like`.

  Reads the content straight into a new array when the file starts with
  `content_header` of `like`'s dtype and shape (one copy); any other encoding
  is parsed with protobuf and `tf.make_ndarray`. The same bits either way.

  Raises:
    FileNotFoundError: If `path` does not exist.
    ValueError: Naming `path`, if it is empty, holds another dtype or shape
      than `like`, or has fewer or more bytes than its header announces.
  """
  header = content_header(like.dtype, like.shape)
  with open(path, 'rb') as f:  # Buffered: readinto fills past 2 GB too.
    start = f.read(len(header))
    if start == header:
      array = np.empty(like.shape, like.dtype)
      size = f.readinto(memoryview(array).cast('B'))
      if size != array.nbytes or f.read(1):
        raise ValueError(
            f'{path} does not hold the {array.nbytes} bytes of content its '
            'header announces: a partly written or foreign file.'
        )
      return array
    serialized = start + f.read()
  if not serialized:
    raise ValueError(f'{path} is empty: no tensor was written to it.')
  array = tf.make_ndarray(tensor_pb2.TensorProto.FromString(serialized))
  if array.dtype != like.dtype or array.shape != like.shape:
    raise ValueError(
        f'{path} holds a {array.dtype} tensor of shape {array.shape}; '
        f'{like.dtype} of shape {like.shape} was expected there.'
    )
  return array


def write_tensor_file(path: str, array: np.ndarray) -> None:
  """`array` to `path` as a serialized `TensorProto` (`tf.io.parse_tensor`).

  The header of `content_header`, then the array's bytes in little-endian
  order; the file is created private (0600) and replaced if it exists.
  """
  array = np.asarray(array)  # Not np.ascontiguousarray: it makes 0-d 1-d.
  dtype = np.dtype(array.dtype.name)  # The header's dtype: no byte order.
  array = array.astype(dtype.newbyteorder('<'), order='C', copy=False)
  fd = os.open(
      path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600
  )
  with os.fdopen(fd, 'wb') as f:
    f.write(content_header(dtype, array.shape))
    array.tofile(f)
