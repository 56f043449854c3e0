"""Label-skew federated partitions of centralized data, and their `ClientData`.

Datasets without natural writers (MNIST, `.npz` files) are made federated by
the Dirichlet label partition of Hsu et al. 2019 ("Measuring the effects of
non-identical data distribution for federated visual classification"), and
`client_data_from_partition` serves such a partition as a
`tff.simulation.datasets.ClientData` of single (unbatched) examples.
"""

import collections
import math
from collections.abc import Sequence
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks

_MIN_CLIENT_ID_WIDTH = 4


def _check_labels(labels) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.ndim != 1 or labels.dtype.kind not in 'iu':
    raise ValueError(
        '`labels` must be a 1-D array of integer class labels, got an array '
        f'of shape {labels.shape} and dtype {labels.dtype}.'
    )
  return labels


def dirichlet_label_partition(
    labels: np.ndarray, num_clients: int, alpha: float, seed: int
) -> list[np.ndarray]:
  """Splits examples among clients with Dirichlet label skew.

  For every class `c` (the distinct values of `labels`), the indices of the
  class's examples are shuffled, proportions
  `p ~ Dir(alpha * ones(num_clients))` are drawn, and client `k` receives the
  slice between `floor(n_c * sum(p[:k]))` and `floor(n_c * sum(p[:k+1]))`
  (the last client takes the remainder), where `n_c` is the class's example
  count.

  Special values of `alpha`:

  * `alpha == 0`: every client holds exactly one class. The clients are put in a
    seeded random order and dealt the classes (in sorted order) round-robin;
    each class's shuffled examples are then split as evenly as possible
    (`np.array_split`) among the clients that were dealt it. Needs
    `num_clients >= number of classes`, so that every class has a client.
  * `alpha == inf`: every class is split in equal proportions (IID up to
    rounding).

  Every example goes to exactly one client. Clients may receive no example at
  all (likely for small `alpha`, or at `alpha == 0` when a class has fewer
  examples than clients holding it); they are kept, with an empty index array,
  so that the result always has `num_clients` entries.

  The result depends only on the arguments: the same `seed` gives identical
  output (`np.random.default_rng(seed)` drives all randomness).

  Args:
    labels: Integer class labels, shape `[num_examples]`.
    num_clients: Number of clients, an integer >= 1.
    alpha: Dirichlet concentration, a real number in `[0, inf]`.
    seed: Random seed, an integer >= 0.

  Returns:
    A list of `num_clients` arrays: element `k` holds the sorted `int64` indices
    into `labels` of client `k`'s examples, shape `[num_examples_k]`.

  Raises:
    ValueError: If an argument is outside its allowed values (the message names
      it), or if `alpha == 0` and `num_clients` is smaller than the number of
      classes.
  """
  labels = _check_labels(labels)
  num_clients = checks.check_int('num_clients', num_clients, minimum=1)
  alpha = checks.check_number('alpha', alpha, minimum=0, allow_infinity=True)
  seed = checks.check_int('seed', seed, minimum=0)
  classes = np.unique(labels)
  if alpha == 0 and num_clients < classes.size:
    raise ValueError(
        '`alpha`=0 (one class per client) needs `num_clients` >= the number '
        f'of classes, got num_clients={num_clients} for {classes.size} '
        'classes.'
    )

  rng = np.random.default_rng(seed)
  if alpha == 0:
    client_order = rng.permutation(num_clients)
  client_shards = [[] for _ in range(num_clients)]
  for class_position, label in enumerate(classes):
    class_indices = np.flatnonzero(labels == label).astype(np.int64)
    rng.shuffle(class_indices)
    if alpha == 0:
      holders = client_order[class_position :: classes.size]
      shards = np.array_split(class_indices, holders.size)
    else:
      holders = range(num_clients)
      shards = _dirichlet_split(
          class_indices, alpha=alpha, rng=rng, num_clients=num_clients
      )
    for client, shard in zip(holders, shards):
      client_shards[client].append(shard)

  return [
      np.sort(np.concatenate(shards)) if shards else np.zeros([0], np.int64)
      for shards in client_shards
  ]


def _dirichlet_split(
    class_indices: np.ndarray,
    *,
    alpha: float,
    rng: np.random.Generator,
    num_clients: int,
) -> list[np.ndarray]:
  """One class's shuffled indices cut in Dir(alpha) proportions (equal: inf)."""
  if math.isinf(alpha):
    proportions = np.full(num_clients, 1.0 / num_clients)
  else:
    proportions = rng.dirichlet(np.full(num_clients, alpha))
  cut_points = (np.cumsum(proportions)[:-1] * class_indices.size).astype(
      np.int64
  )
  return np.split(class_indices, cut_points)


def default_client_ids(num_clients: int) -> list[str]:
  """Zero-padded client ids `'0000', '0001', ...` (wider when needed).

  Args:
    num_clients: Number of ids, an integer >= 1.

  Returns:
    `num_clients` strings of equal width, at least 4 digits.
  """
  num_clients = checks.check_int('num_clients', num_clients, minimum=1)
  width = max(_MIN_CLIENT_ID_WIDTH, len(str(num_clients - 1)))
  return [f'{k:0{width}d}' for k in range(num_clients)]


def client_data_from_partition(
    x: np.ndarray,
    y: np.ndarray,
    partition: Sequence[np.ndarray],
    client_ids: Optional[Sequence[str]] = None,
) -> tff.simulation.datasets.ClientData:
  """Builds a `ClientData` whose client `k` holds the rows `partition[k]`.

  Each dataset element is one example, `OrderedDict(x=x[i], y=y[i])`, with the
  dtypes of `x` and `y` and shapes `x.shape[1:]` and `y.shape[1:]`; datasets
  are unbatched and in the order of `partition[k]`. Clients with an empty index
  array have empty datasets.

  `create_tf_dataset_for_client` slices the numpy arrays directly. The
  `serializable_dataset_fn` (used by `dataset_computation`) embeds the
  partitioned rows in the TensorFlow graph as constants, like
  `tff.simulation.datasets.TestClientData`; graphs are limited to 2 GB, which
  is ample for MNIST-sized data (about 160 MB).

  Args:
    x: Features, shape `[num_examples, ...]`.
    y: Labels, shape `[num_examples, ...]`.
    partition: For every client, an integer index array into the first axis of
      `x` and `y` (e.g. from `dirichlet_label_partition`). Indices may repeat
      across clients; they must lie in `[0, num_examples)`.
    client_ids: Distinct string ids, one per entry of `partition`; defaults to
      `default_client_ids(len(partition))`.

  Returns:
    A `tff.simulation.datasets.ClientData` over `client_ids`.

  Raises:
    ValueError: If `x` and `y` differ in length, `partition` is empty or holds
      a non-integer array or an index out of range, or `client_ids` does not
      have one distinct string per client.
  """
  x = np.asarray(x)
  y = np.asarray(y)
  if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0]:
    raise ValueError(
        '`x` and `y` must have the same number of examples (first axis), got '
        f'shapes {x.shape} and {y.shape}.'
    )
  shards = _checked_shards(partition, x.shape[0])
  client_ids = _checked_client_ids(client_ids, len(shards))
  # Rows in client order: client k's examples are rows offsets[k]:offsets[k+1].
  order = np.concatenate(shards)
  offsets = np.concatenate([[0], np.cumsum([s.size for s in shards])]).astype(
      np.int64
  )
  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      client_ids,
      _rows_dataset_fn(
          x[order], y[order], offsets=offsets, client_ids=client_ids
      ),
  )


def client_data_from_arrays(
    client_ids: Sequence[str],
    arrays: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tff.simulation.datasets.ClientData:
  """`client_data_from_partition` of each client's own `(x, y)`, in order."""
  sizes = np.cumsum([0] + [x.shape[0] for x, _ in arrays])
  return client_data_from_partition(
      np.concatenate([x for x, _ in arrays]),
      np.concatenate([y for _, y in arrays]),
      [np.arange(start, end) for start, end in zip(sizes, sizes[1:])],
      list(client_ids),
  )


def _checked_shards(
    partition: Sequence[np.ndarray], num_examples: int
) -> list[np.ndarray]:
  """The partition's index arrays as int64, after checking them."""
  if not partition:
    raise ValueError('`partition` must hold at least one client.')
  shards = []
  for k, indices in enumerate(partition):
    indices = np.asarray(indices)
    if indices.ndim != 1 or (indices.size and indices.dtype.kind not in 'iu'):
      raise ValueError(
          f'`partition[{k}]` must be a 1-D integer index array, got shape '
          f'{indices.shape} and dtype {indices.dtype}.'
      )
    if indices.size and (indices.min() < 0 or indices.max() >= num_examples):
      raise ValueError(
          f'`partition[{k}]` has indices outside [0, {num_examples}).'
      )
    shards.append(indices.astype(np.int64))
  return shards


def _checked_client_ids(
    client_ids: Optional[Sequence[str]], num_clients: int
) -> list[str]:
  """`client_ids` (default ids if None) as a list, after checking them."""
  if client_ids is None:
    client_ids = default_client_ids(num_clients)
  client_ids = list(client_ids)
  if (
      len(client_ids) != num_clients
      or len(set(client_ids)) != len(client_ids)
      or not all(isinstance(c, str) for c in client_ids)
  ):
    raise ValueError(
        '`client_ids` must be distinct strings, one per entry of `partition` '
        f'({num_clients}), got {len(client_ids)} ids.'
    )
  return client_ids


def _rows_dataset_fn(
    x_rows: np.ndarray,
    y_rows: np.ndarray,
    *,
    offsets: np.ndarray,
    client_ids: list[str],
):
  """`client_id -> tf.data.Dataset` of rows `offsets[k]:offsets[k+1]`.

  A Python id (str or bytes) slices the numpy arrays; a string tensor (the
  graph path, serializable into a TFF computation) embeds the rows as
  constants.
  """
  position = {client_id: k for k, client_id in enumerate(client_ids)}

  def dataset_fn(client_id):
    if isinstance(client_id, (str, bytes)):
      # Eager path: numpy views, nothing copied into TensorFlow constants.
      if isinstance(client_id, bytes):
        client_id = client_id.decode()
      if client_id not in position:
        raise ValueError(f'Unknown client id {client_id!r}.')
      k = position[client_id]
      start, end = offsets[k], offsets[k + 1]
      return tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict(x=x_rows[start:end], y=y_rows[start:end])
      )
    # Graph path (a string tensor): serializable into a TFF computation.
    matches = tf.where(tf.equal(tf.constant(client_ids), client_id))
    check = tf.debugging.assert_equal(
        tf.shape(matches)[0],
        1,
        message='Unknown client id for client_data_from_partition',
    )
    with tf.control_dependencies([check]):
      k = tf.identity(matches[0, 0])
    offsets_t = tf.constant(offsets)
    start, end = offsets_t[k], offsets_t[k + 1]
    return tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(
            x=tf.constant(x_rows)[start:end], y=tf.constant(y_rows)[start:end]
        )
    )

  return dataset_fn
