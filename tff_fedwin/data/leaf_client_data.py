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
from tff_fedwin.data import leaf_celeba
from tff_fedwin.data import leaf_reddit
from tff_fedwin.data import leaf_sent140

LeafCache = leaf_cache.LeafCache


_CELEBA_SHAPE = [leaf_celeba.IMAGE_SIZE, leaf_celeba.IMAGE_SIZE, 3]


def _x_layout(kind: str, x_width: int) -> tuple[tf.DType, tf.DType, list]:
  """(stored dtype, element dtype, element shape) of a kind's x."""
  return {
      'femnist': (tf.float32, tf.float32, [28, 28, 1]),
      'synthetic': (tf.float32, tf.float32, [x_width]),
      'shakespeare': (tf.uint8, tf.int32, [leaf.SHAKESPEARE_SEQ_LENGTH]),
      'sent140': (tf.int32, tf.int32, [leaf_sent140.SEQ_LENGTH]),
      'celeba': (tf.uint8, tf.float32, _CELEBA_SHAPE),
      'reddit': (tf.int32, tf.int32, [leaf_reddit.SEQ_LENGTH]),
  }[kind]


def _y_shape(kind: str) -> list[int]:
  return [leaf_reddit.SEQ_LENGTH] if kind == 'reddit' else []


def _element_spec(kind: str, x_width: int) -> collections.OrderedDict:
  _, dtype, shape = _x_layout(kind, x_width)
  return collections.OrderedDict(
      x=tf.TensorSpec(shape, dtype), y=tf.TensorSpec(_y_shape(kind), tf.int32)
  )


def _decode(kind: str, x_width: int, x_bytes, y_bytes):
  """x, y tensors of `n` examples from their raw bytes (see `_element_spec`)."""
  stored, dtype, shape = _x_layout(kind, x_width)
  x = tf.reshape(tf.io.decode_raw(x_bytes, stored), [-1, *shape])
  y_stored = tf.uint8 if kind == 'shakespeare' else tf.int32
  y = tf.reshape(tf.io.decode_raw(y_bytes, y_stored), [-1, *_y_shape(kind)])
  return tf.cast(x, dtype), tf.cast(y, tf.int32)


class LeafClientData(tff.simulation.datasets.ClientData):
  """The training split of a `LeafCache`, each client read from its files.

  Elements: femnist `OrderedDict(x=float32[28, 28, 1], y=int32[])`;
  shakespeare `OrderedDict(x=int32[80], y=int32[])` (ids as in `leaf.py`);
  synthetic `OrderedDict(x=float32[d], y=int32[])`; sent140
  `OrderedDict(x=int32[25], y=int32[])` (word ids); celeba
  `OrderedDict(x=float32[84, 84, 3], y=int32[])` (values 0..255, as LEAF
  feeds them); reddit `OrderedDict(x=int32[10], y=int32[10])` (token ids).
  """

  DATASETS_FROM_IDS = True

  def __init__(self, cache: LeafCache):
    self._cache = cache
    self._spec = _element_spec(cache.kind, cache.x_width)

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
