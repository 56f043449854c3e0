"""Which clients train in a round, and in what order, from (seed, round).

`sample_clients` draws a round's clients; `client_shuffle_seed` seeds each
sampled client's shuffle, a new order each round yet the same on a rerun or
resume (docs/design.md sec. 5.2). The seed (and a round's local epochs,
`epoch_decay_fn`) reaches `preprocess_fn` in the driver (`client_datasets`)
or in the worker through a client key (`client_keys`,
`keyed_dataset_computation`).
"""

from collections.abc import Callable, Sequence
import hashlib
import inspect
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# `(dataset) -> dataset`, or `(dataset, shuffle_seed=None) -> dataset`.
PreprocessFn = Callable[..., tf.data.Dataset]


def sample_clients(
    client_ids: Sequence[str], clients_per_round: int, seed: int, round_num: int
) -> list[str]:
  """The clients of round `round_num`: without replacement, from `(seed, t)`.

  The RNG depends on `(seed, t)` alone: a resumed run samples the same
  clients with no saved RNG state (docs/design.md sec. 5.2).

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


def client_shuffle_seed(seed: int, round_num: int, client_id: str) -> int:
  """The seed of client `client_id`'s shuffle in round `round_num`.

  The first 8 bytes of SHA-256 of `"<seed>/<round_num>/<client_id>"` (UTF-8),
  big-endian, shifted right by one bit: an int in [0, 2**63), a function of
  the three alone (no RNG state to save for a resume).
  """
  digest = hashlib.sha256(f'{seed}/{round_num}/{client_id}'.encode()).digest()
  return int.from_bytes(digest[:8], 'big') >> 1


def _takes(preprocess_fn: Callable[..., Any], keyword: str) -> bool:
  """Whether `preprocess_fn` takes the keyword argument `keyword`."""
  try:
    parameters = inspect.signature(preprocess_fn).parameters
  except (TypeError, ValueError):
    return False
  return keyword in parameters


def takes_shuffle_seed(preprocess_fn: Callable[..., Any]) -> bool:
  """Whether `preprocess_fn` takes a `shuffle_seed` keyword argument.

  The tasks' `preprocess_fn` (`tff_fedwin.tasks.task.batching_fn`) does; a
  one-argument function (TFF's `ClientData.preprocess` convention) is called
  with the dataset alone and keeps its own order.
  """
  return _takes(preprocess_fn, 'shuffle_seed')


def takes_epochs(preprocess_fn: Callable[..., Any]) -> bool:
  """Whether `preprocess_fn` takes an `epochs` keyword argument (the round's
  local epochs in place of its own; `batching_fn`'s does, with a
  `shuffle_seed`)."""
  return takes_shuffle_seed(preprocess_fn) and _takes(preprocess_fn, 'epochs')


def epoch_decay_fn(
    epochs: int, start_round: int, every: int
) -> Callable[[int], int]:
  """IMA's epoch decay (IMA Table 3): one local epoch fewer every `every`
  rounds from `start_round` on, down to 1.

  E_t = max(1, E - floor(max(0, t - t_s) / P)) for round t >= 1, with E =
  `epochs`, t_s = `start_round`, P = `every` (the IMA authors: P = 20 from
  IMA's start). Plain Python, evaluated by the loop before each round.
  """
  return lambda t: max(1, epochs - max(0, t - start_round) // every)


def client_keys(
    client_ids: Sequence[str],
    seed: int,
    round_num: int,
    epochs: Optional[int] = None,
) -> list[str]:
  """`<client_shuffle_seed>/<client id>` of each id, for the workers; with
  `epochs`, `<client_shuffle_seed>/<epochs>/<client id>`.

  The input of `keyed_dataset_computation`: the worker builds the client's
  dataset from its id and shuffles it with the round's seed.
  """
  middle = '' if epochs is None else f'{int(epochs)}/'
  return [
      f'{client_shuffle_seed(seed, round_num, c)}/{middle}{c}'
      for c in client_ids
  ]


def keyed_dataset_computation(
    client_data: tff.simulation.datasets.ClientData,
    preprocess_fn: Callable[..., tf.data.Dataset],
    with_epochs: bool = False,
) -> tff.Computation:
  """`(client key -> preprocessed dataset)`, run by the workers.

  TFF's `client_data.preprocess(fn).dataset_computation` with a
  `client_keys` key in place of the id: `preprocess_fn(raw dataset of the
  id, shuffle_seed=<the key's seed>)`, the same dataset `client_datasets`
  builds in the driver for the same round.

  Args:
    client_data: A `ClientData` whose `serializable_dataset_fn` builds a
      client's raw dataset from its id in a graph.
    preprocess_fn: `(dataset, shuffle_seed=None) -> dataset`
      (`takes_shuffle_seed`); with `with_epochs`, also `epochs=`.
    with_epochs: Whether the keys carry the round's epochs (`client_keys`
      with `epochs`).

  Returns:
    A `tff.Computation` of type `(string -> D*)`.
  """
  dataset_fn = client_data.serializable_dataset_fn
  parts = 3 if with_epochs else 2

  @tff.tensorflow.computation(np.str_)
  def dataset_computation(client_key):
    fields = tf.unstack(
        tf.strings.split(client_key, '/', maxsplit=parts - 1), num=parts
    )
    epochs = {}
    if with_epochs:
      epochs['epochs'] = tf.strings.to_number(fields[1], tf.int64)
    return preprocess_fn(
        dataset_fn(fields[-1]),
        shuffle_seed=tf.strings.to_number(fields[0], tf.int64),
        **epochs,
    )

  return dataset_computation


def client_datasets(
    client_data: tff.simulation.datasets.ClientData,
    client_ids: Sequence[str],
    preprocess_fn: Callable[..., tf.data.Dataset],
    *,
    seed: Optional[int] = None,
    round_num: Optional[int] = None,
    epochs: Optional[int] = None,
) -> list[tf.data.Dataset]:
  """`preprocess_fn` of each client's raw dataset, in the order of the ids.

  With `seed` and `round_num`, `preprocess_fn` also takes each client's
  `shuffle_seed=client_shuffle_seed(seed, round_num, id)`, and with
  `epochs` the round's `epochs=`; without, the dataset alone. The ids must
  come from `client_data.client_ids` (they are not checked again: that
  check scans the population, see `_raw_dataset_fn`).
  """
  dataset_fn = _raw_dataset_fn(client_data)
  if seed is None or round_num is None:
    return [preprocess_fn(dataset_fn(c)) for c in client_ids]
  extra = {} if epochs is None else {'epochs': int(epochs)}
  return [
      preprocess_fn(
          dataset_fn(c),
          shuffle_seed=client_shuffle_seed(seed, round_num, c),
          **extra,
      )
      for c in client_ids
  ]


def round_client_data(
    client_data: tff.simulation.datasets.ClientData,
    client_ids: Sequence[str],
    preprocess_fn: Callable[..., tf.data.Dataset],
    *,
    seed: int,
    round_num: int,
    by_id: bool,
    epochs: Optional[int] = None,
) -> list[Any]:
  """What round `round_num` trains on: the clients' datasets, or their keys.

  A `preprocess_fn` that `takes_shuffle_seed` gets each client's
  `client_shuffle_seed(seed, round_num, id)` (and the round's `epochs`, if
  given: it must `takes_epochs`): in the driver (`client_datasets`), or,
  `by_id` (the runner's workers build the datasets), through `client_keys`
  for `keyed_dataset_computation`. Without it: the datasets of the ids, or
  the ids themselves.
  """
  reshuffles = takes_shuffle_seed(preprocess_fn)
  if by_id:
    return (
        client_keys(client_ids, seed, round_num, epochs)
        if reshuffles
        else list(client_ids)
    )
  if not reshuffles:
    return client_datasets(client_data, client_ids, preprocess_fn)
  return client_datasets(
      client_data,
      client_ids,
      preprocess_fn,
      seed=seed,
      round_num=round_num,
      epochs=epochs,
  )
