"""A synthetic EMNIST-shaped population, generated lazily client by client.

`SyntheticPopulation` is a `tff.simulation.datasets.ClientData` of any number
of clients whose data is never stored: client k's examples are drawn when its
dataset is created, by stateless TensorFlow random ops seeded with
`(seed, k)`. Creating one client's dataset therefore costs the same for 100,
3,400 or 34,000 clients, and the only O(population) object is the list of ids
that the `ClientData` API requires (`client_ids`, built once). Used by the
scale benchmark (`benchmarks.scale`).
"""

import collections
from typing import Any, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks

IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 62
_MIN_ID_WIDTH = 4


def _client_examples(
    index: Any, *, seed: int, examples: int, num_classes: int
) -> collections.OrderedDict:
  """Client `index`'s examples: `x` uniform in [0, 1), `y` uniform classes.

  Traceable: `index` is a Python int or an int64 tensor. The pixels use the
  stateless seed `[2 * index, seed]` and the labels `[2 * index + 1, seed]`.
  """
  index = tf.cast(index, tf.int64)
  seed = tf.constant(seed, tf.int64)
  x = tf.random.stateless_uniform(
      [examples, *IMAGE_SHAPE],
      seed=tf.stack([2 * index, seed]),
      dtype=tf.float32,
  )
  y = tf.random.stateless_uniform(
      [examples],
      seed=tf.stack([2 * index + 1, seed]),
      minval=0,
      maxval=num_classes,
      dtype=tf.int32,
  )
  return collections.OrderedDict(x=x, y=y)


class SyntheticPopulation(tff.simulation.datasets.ClientData):
  """`num_clients` clients of random 28x28x1 images and 62-class labels.

  Client ids are zero-padded indices (`'0000'`, `'0001'`, ...; wider for more
  than 10,000 clients). Every client holds `examples_per_client` unbatched
  examples `OrderedDict(x=float32[28, 28, 1], y=int32[])`, the same every
  time its dataset is created and different from every other client's.

  `create_tf_dataset_for_client` parses the id instead of TFF's
  `client_id in self.client_ids` (a scan of the whole list per call), so it
  is O(1) in the population; `serializable_dataset_fn` also takes a string
  tensor (the graph path of `dataset_computation`) and gives the same data,
  so the workers build the sampled clients' datasets from their ids
  (`DATASETS_FROM_IDS`; `algorithms.client_data_bundle.
  builds_datasets_from_ids`) and no population is ever written out.
  """

  # The examples are computed from the id in the graph: `dataset_computation`
  # holds none of them.
  DATASETS_FROM_IDS = True

  def __init__(
      self,
      num_clients: int,
      examples_per_client: int = 20,
      *,
      seed: int = 0,
      num_classes: int = NUM_CLASSES,
  ):
    """Initializes the population; no client data is created here.

    Args:
      num_clients: Number of clients, >= 1.
      examples_per_client: Examples of every client, >= 1.
      seed: Non-negative seed of all clients' data.
      num_classes: Label classes, >= 1 (labels are `0..num_classes-1`).

    Raises:
      ValueError: If an argument is out of range (the message names it).
    """
    super().__init__()
    self._num_clients = checks.check_int('num_clients', num_clients, minimum=1)
    self._examples = checks.check_int(
        'examples_per_client', examples_per_client, minimum=1
    )
    self._seed = checks.check_int('seed', seed, minimum=0)
    self._num_classes = checks.check_int('num_classes', num_classes, minimum=1)
    self._width = max(_MIN_ID_WIDTH, len(str(self._num_clients - 1)))
    self._client_ids = [
        f'{k:0{self._width}d}' for k in range(self._num_clients)
    ]
    self._element_spec = collections.OrderedDict(
        x=tf.TensorSpec(IMAGE_SHAPE, tf.float32),
        y=tf.TensorSpec([], tf.int32),
    )

  @property
  def client_ids(self) -> list[str]:
    return self._client_ids

  @property
  def examples_per_client(self) -> int:
    return self._examples

  @property
  def element_type_structure(self) -> collections.OrderedDict:
    return self._element_spec

  @property
  def serializable_dataset_fn(self):
    return self._dataset_fn

  def client_index(self, client_id: str) -> int:
    """The index k of `client_id`; ValueError if it is not a client's id."""
    if (
        not isinstance(client_id, str)
        or len(client_id) != self._width
        or not client_id.isascii()
        or not client_id.isdigit()
        or int(client_id) >= self._num_clients
    ):
      raise ValueError(
          f'ID [{client_id}] is not a client in this ClientData: ids are '
          f'{self._width}-digit indices below {self._num_clients}.'
      )
    return int(client_id)

  def create_tf_dataset_for_client(self, client_id: str) -> tf.data.Dataset:
    """Client `client_id`'s unbatched examples; O(1) in the population."""
    return self._dataset(self.client_index(client_id))

  def _dataset_fn(
      self, client_id: Union[str, bytes, tf.Tensor]
  ) -> tf.data.Dataset:
    """Ids as str (checked), bytes or a string tensor (graph path)."""
    if isinstance(client_id, bytes):
      client_id = client_id.decode()
    if isinstance(client_id, str):
      return self.create_tf_dataset_for_client(client_id)
    return self._dataset(tf.strings.to_number(client_id, tf.int64))

  def _dataset(self, index: Any) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(
        _client_examples(
            index,
            seed=self._seed,
            examples=self._examples,
            num_classes=self._num_classes,
        )
    )


def synthetic_test_dataset(
    num_examples: int, batch_size: int, seed: int = 0
) -> tf.data.Dataset:
  """A batched centralized test set of the same kind (the evaluate_fn's)."""
  examples = _client_examples(
      -1, seed=seed, examples=num_examples, num_classes=NUM_CLASSES
  )
  return tf.data.Dataset.from_tensor_slices(examples).batch(batch_size)
