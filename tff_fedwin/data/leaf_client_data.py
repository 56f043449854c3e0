"""The training split of a `LeafCache` as a `ClientData` read by id.

`LeafClientData` is a `tff.simulation.datasets.ClientData` declared
`DATASETS_FROM_IDS` (`tff_fedwin.data.from_ids`): its
`serializable_dataset_fn` reads one client's files of the conversion
(`tff_fedwin.data.leaf_cache`) with `tf.io.read_file` and `tf.io.decode_raw`,
the file name from the id with `tf.io.encode_base64`, like EMNIST's
`SqlClientData` queries its database: the data reach the workers by id, and
the driver holds no client's arrays. `test_dataset` streams the pooled test
split.
"""

import collections
import os

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache

LeafCache = leaf_cache.LeafCache


def _element_spec(kind: str, x_width: int) -> collections.OrderedDict:
  if kind == 'femnist':
    return collections.OrderedDict(
        x=tf.TensorSpec([28, 28, 1], tf.float32), y=tf.TensorSpec([], tf.int32)
    )
  if kind == 'synthetic':
    return collections.OrderedDict(
        x=tf.TensorSpec([x_width], tf.float32), y=tf.TensorSpec([], tf.int32)
    )
  return collections.OrderedDict(
      x=tf.TensorSpec([leaf.SHAKESPEARE_SEQ_LENGTH], tf.int32),
      y=tf.TensorSpec([], tf.int32),
  )


def _decode(kind: str, x_width: int, x_bytes, y_bytes):
  """x, y tensors of `n` examples from their raw bytes (see `_element_spec`)."""
  if kind in ('femnist', 'synthetic'):
    shape = [-1, 28, 28, 1] if kind == 'femnist' else [-1, x_width]
    x = tf.reshape(tf.io.decode_raw(x_bytes, tf.float32), shape)
    return x, tf.reshape(tf.io.decode_raw(y_bytes, tf.int32), [-1])
  x = tf.io.decode_raw(x_bytes, tf.uint8)
  x = tf.cast(tf.reshape(x, [-1, leaf.SHAKESPEARE_SEQ_LENGTH]), tf.int32)
  y = tf.cast(tf.reshape(tf.io.decode_raw(y_bytes, tf.uint8), [-1]), tf.int32)
  return x, y


class LeafClientData(tff.simulation.datasets.ClientData):
  """The training split of a `LeafCache`, each client read from its files.

  Elements: femnist `OrderedDict(x=float32[28, 28, 1], y=int32[])`;
  shakespeare `OrderedDict(x=int32[80], y=int32[])` (ids as in `leaf.py`);
  synthetic `OrderedDict(x=float32[d], y=int32[])`.
  """

  DATASETS_FROM_IDS = True

  def __init__(self, cache: LeafCache):
    self._cache = cache
    self._spec = _element_spec(cache.kind, cache.x_width)

  @property
  def cache(self) -> LeafCache:
    return self._cache

  @property
  def client_ids(self) -> list[str]:
    return list(self._cache.client_ids)

  @property
  def element_type_structure(self):
    return self._spec

  @property
  def serializable_dataset_fn(self):
    """`client id (str or string tensor) -> tf.data.Dataset` of its files."""
    train_dir = os.path.join(self._cache.directory, 'train') + os.sep
    kind, x_width = self._cache.kind, self._cache.x_width

    def dataset_fn(client_id):
      base = tf.strings.join(
          [train_dir, tf.io.encode_base64(client_id, pad=False)]
      )
      x, y = _decode(
          kind,
          x_width,
          tf.io.read_file(tf.strings.join([base, '.x'])),
          tf.io.read_file(tf.strings.join([base, '.y'])),
      )
      return tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict(x=x, y=y)
      )

    return dataset_fn


def test_dataset(cache: LeafCache) -> tf.data.Dataset:
  """The pooled test split, unbatched, streamed from `test.x` and `test.y`."""
  x_bytes, y_bytes = leaf_cache.record_bytes(cache.kind, cache.x_width)
  records = tf.data.Dataset.zip(
      tuple(
          tf.data.FixedLengthRecordDataset(
              os.path.join(cache.directory, name), size
          )
          for name, size in (('test.x', x_bytes), ('test.y', y_bytes))
      )
  )

  def decode(x_record, y_record):
    x, y = _decode(cache.kind, cache.x_width, x_record, y_record)
    return collections.OrderedDict(x=x[0], y=y[0])

  return records.map(decode)
