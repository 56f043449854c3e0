"""Which clients train in a round, from the seed and the round number alone."""

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

PreprocessFn = Callable[[tf.data.Dataset], tf.data.Dataset]


def sample_clients(
    client_ids: Sequence[str], clients_per_round: int, seed: int, round_num: int
) -> list[str]:
  """The clients of round `round_num`: without replacement, from `(seed, t)`.

  `np.random.default_rng([seed, round_num]).choice(len(client_ids),
  clients_per_round, replace=False)` indexes `client_ids`. Every round's RNG is
  made from the seed and the round number alone, so a resumed run samples the
  same clients as an uninterrupted one without saving any RNG state.

  Args:
    client_ids: All client ids, in a fixed order (`ClientData.client_ids`).
    clients_per_round: 1 <= clients_per_round <= len(client_ids).
    seed: A non-negative int.
    round_num: The round, t >= 1.

  Returns:
    `clients_per_round` distinct ids.
  """
  rng = np.random.default_rng([seed, round_num])
  indices = rng.choice(len(client_ids), size=clients_per_round, replace=False)
  return [client_ids[i] for i in indices]


def _raw_dataset_fn(
    client_data: tff.simulation.datasets.ClientData,
) -> Callable[[str], tf.data.Dataset]:
  """`client id -> raw dataset` at a cost independent of the population.

  TFF's `ClientData.create_tf_dataset_for_client` (and `SqlClientData`'s) is
  `client_id in self.client_ids`, a scan of the population's id list, then
  `serializable_dataset_fn(client_id)`: at 342k StackOverflow users the scan
  alone costs milliseconds per client. The loop samples ids from
  `client_ids`, so for those classes it calls `serializable_dataset_fn`
  directly; other `ClientData` (which may do more in
  `create_tf_dataset_for_client`) keep their method.
  """
  create = type(client_data).create_tf_dataset_for_client
  if (
      create is tff.simulation.datasets.ClientData.create_tf_dataset_for_client
      or (isinstance(client_data, tff.simulation.datasets.SqlClientData))
  ):
    return client_data.serializable_dataset_fn
  return client_data.create_tf_dataset_for_client


def client_datasets(
    client_data: tff.simulation.datasets.ClientData,
    client_ids: Sequence[str],
    preprocess_fn: PreprocessFn,
) -> list[tf.data.Dataset]:
  """`preprocess_fn` of each client's raw dataset, in the order of the ids.

  The ids must come from `client_data.client_ids` (they are not checked
  again: that check scans the population, see `_raw_dataset_fn`).
  """
  dataset_fn = _raw_dataset_fn(client_data)
  return [preprocess_fn(dataset_fn(c)) for c in client_ids]
