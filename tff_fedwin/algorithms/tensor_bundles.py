"""Tensors as TensorFlow tensor bundles, in graphs and in the driver.

A tensor bundle is TensorFlow's checkpoint format: `<prefix>.index` (each
tensor's dtype, shape, offset and CRC32C) and `<prefix>.data-00000-of-00001`
(the tensors' raw bytes). A TFF worker writes one with the `SaveV2` op and
reads it with `RestoreV2`; the driver uses `SaveV2` eagerly to write and
`tf.train.load_checkpoint` to read. The tensors are named `'0'`, `'1'`, ...
in list order unless other (distinct) names are given. `SaveV2` writes
temporary files and renames them, so a reader never sees a half-written
bundle under its name. Every read checks each tensor's CRC32C, so a partly
written or foreign file is refused, not read (docs/performance.md sec. 2.4,
'Tensor bundles').
"""

import os
from collections.abc import Sequence
from typing import Optional

import numpy as np
import tensorflow as tf

DATA_SUFFIX = '.data-00000-of-00001'
INDEX_SUFFIX = '.index'


def _names(count: int) -> list[str]:
  return [str(j) for j in range(count)]


def save_op(
    prefix: tf.Tensor,
    tensors: Sequence[tf.Tensor],
    names: Optional[Sequence[str]] = None,
) -> tf.Operation:
  """The op that writes `tensors` as the bundle at `prefix` (runs if eager)."""
  return tf.raw_ops.SaveV2(
      prefix=prefix,
      tensor_names=_names(len(tensors)) if names is None else list(names),
      shape_and_slices=[''] * len(tensors),
      tensors=list(tensors),
  )


def restore(
    prefix: tf.Tensor,
    specs: Sequence[tf.TensorSpec],
    names: Optional[tf.Tensor] = None,
) -> list[tf.Tensor]:
  """In a graph: the tensors of the bundle at `prefix`, shaped as `specs`.

  `names` (a string vector, one name per spec; it may be computed in the
  graph) selects the tensors, by default `'0'`, `'1'`, ...

  The read fails (an op error naming the file) if a tensor is missing, has
  another dtype, or its bytes fail their checksum; `tf.ensure_shape` fails if
  one has another shape.
  """
  tensors = tf.raw_ops.RestoreV2(
      prefix=prefix,
      tensor_names=_names(len(specs)) if names is None else names,
      shape_and_slices=[''] * len(specs),
      dtypes=[spec.dtype for spec in specs],
  )
  return [tf.ensure_shape(t, spec.shape) for t, spec in zip(tensors, specs)]


def write(
    prefix: str,
    arrays: Sequence[np.ndarray],
    names: Optional[Sequence[str]] = None,
) -> None:
  """Writes `arrays` as the bundle at `prefix` (files 0600, replaced)."""
  save_op(prefix, [np.asarray(a) for a in arrays], names)  # Eager: runs now.
  for suffix in (INDEX_SUFFIX, DATA_SUFFIX):
    os.chmod(prefix + suffix, 0o600)


def read(prefix: str, likes: Sequence[np.ndarray]) -> list[np.ndarray]:
  """The arrays of the bundle at `prefix`, checked against `likes`.

  Returns one new array per entry of `likes`, a numpy scalar for a 0-d one,
  the bits written.

  Raises:
    ValueError: Naming `prefix`, if there is no bundle there, or one of its
      tensors is missing, fails its checksum, or holds another dtype or
      shape than its `like`.
  """
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(f'No tensor bundle can be read at {prefix}: {e}') from e
  dtypes = reader.get_variable_to_dtype_map()
  arrays = []
  for name, like in zip(_names(len(likes)), likes):
    if name not in dtypes:
      raise ValueError(f'The tensor bundle {prefix} has no tensor {name}.')
    try:
      array = reader.get_tensor(name)
    except tf.errors.OpError as e:  # E.g. DataLossError: a bad checksum.
      raise ValueError(
          f'Tensor {name} of the bundle {prefix} cannot be read: {e.message}'
      ) from e
    if np.dtype(array.dtype) != like.dtype or np.shape(array) != like.shape:
      raise ValueError(
          f'Tensor {name} of the bundle {prefix} is {array.dtype} of shape '
          f'{np.shape(array)}; {like.dtype} of shape {like.shape} was '
          'expected.'
      )
    arrays.append(array)
  return arrays
