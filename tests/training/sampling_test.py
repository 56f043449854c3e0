"""Tests for tff_fedwin.training.sampling: which clients train in a round."""

import hashlib
import math
import sqlite3

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin.tasks import task as task_lib
from tff_fedwin.training import sampling

CLIENT_IDS = task.CLIENT_IDS


@pytest.mark.parametrize(
    'seed, round_num, clients_per_round',
    [
        (0, 1, 1),
        (5, 3, 2),
        (123, 40, 5),
    ],
)
def test_sample_clients_reproduces_default_rng_of_seed_and_round(
    seed, round_num, clients_per_round
):
  rng = np.random.default_rng([seed, round_num])
  expected = [
      CLIENT_IDS[i]
      for i in rng.choice(
          task.NUM_CLIENTS, size=clients_per_round, replace=False
      )
  ]

  sampled = sampling.sample_clients(
      CLIENT_IDS, clients_per_round, seed, round_num
  )

  assert sampled == expected
  assert len(set(sampled)) == clients_per_round


def test_sample_clients_differs_between_rounds_of_one_seed():
  rounds = [
      tuple(sampling.sample_clients(CLIENT_IDS, 2, 5, t)) for t in range(1, 11)
  ]
  assert len(set(rounds)) > 1


def test_client_datasets_are_the_preprocessed_data_in_id_order():
  ids = [CLIENT_IDS[4], CLIENT_IDS[0]]

  datasets = sampling.client_datasets(task.CLIENT_DATA, ids, task.preprocess_fn)

  for dataset, index in zip(datasets, (4, 0)):
    batches = list(dataset)
    assert len(batches) == math.ceil(task.CLIENT_SIZES[index] / task.BATCH_SIZE)
    x = np.concatenate([b['x'].numpy() for b in batches])
    y = np.concatenate([b['y'].numpy() for b in batches])
    np.testing.assert_array_equal(x, task.TRAIN_X[task.PARTITION[index]])
    np.testing.assert_array_equal(y, task.TRAIN_Y[task.PARTITION[index]])


class _CountingClientData(tff.simulation.datasets.ClientData):
  """Client k holds [k, k + 1]; counts reads of `client_ids`."""

  def __init__(self, num_clients):
    self._ids = [str(k) for k in range(num_clients)]
    self.id_reads = 0

  @property
  def client_ids(self):
    self.id_reads += 1
    return self._ids

  @property
  def serializable_dataset_fn(self):
    return lambda c: tf.data.Dataset.from_tensor_slices([int(c), int(c) + 1])

  @property
  def element_type_structure(self):
    return tf.TensorSpec([], tf.int32)

  @property
  def dataset_computation(self):
    raise NotImplementedError


class _CountingSqlClientData(tff.simulation.datasets.SqlClientData):
  id_reads = 0

  @property
  def client_ids(self):
    type(self).id_reads += 1
    return super().client_ids


def _sql_client_data(path):
  """TFF's SQL schema; client c's examples are the bytes b'c:0', b'c:1'."""
  connection = sqlite3.connect(path)
  connection.execute(
      'CREATE TABLE examples (split_name TEXT, client_id TEXT, '
      'serialized_example_proto BLOB)'
  )
  connection.execute(
      'CREATE TABLE client_metadata (client_id TEXT, split_name TEXT, '
      'num_examples INTEGER)'
  )
  for c in ('a', 'b', 'c'):
    connection.execute(
        'INSERT INTO client_metadata VALUES (?, ?, ?)', (c, 'train', 2)
    )
    for i in range(2):
      connection.execute(
          'INSERT INTO examples VALUES (?, ?, ?)',
          ('train', c, f'{c}:{i}'.encode()),
      )
  connection.commit()
  connection.close()
  return _CountingSqlClientData(path)


def test_client_datasets_do_not_scan_the_population():
  client_data = _CountingClientData(1000)

  datasets = sampling.client_datasets(client_data, ['7', '3'], lambda d: d)

  assert [list(d.as_numpy_iterator()) for d in datasets] == [[7, 8], [3, 4]]
  assert client_data.id_reads == 0


def test_client_datasets_of_sql_client_data_do_not_scan_the_population(
    tmp_path,
):
  client_data = _sql_client_data(str(tmp_path / 'clients.sqlite'))
  reads_before = _CountingSqlClientData.id_reads

  datasets = sampling.client_datasets(client_data, ['c', 'a'], lambda d: d)

  assert [sorted(d.as_numpy_iterator()) for d in datasets] == [
      [b'c:0', b'c:1'],
      [b'a:0', b'a:1'],
  ]
  assert _CountingSqlClientData.id_reads == reads_before


def test_client_datasets_keep_an_overridden_create_method():
  # ClientData.preprocess overrides create_tf_dataset_for_client; its result
  # must be used (here: the doubled values).
  client_data = _CountingClientData(10).preprocess(
      lambda d: d.map(lambda v: 2 * v)
  )

  datasets = sampling.client_datasets(client_data, ['4'], lambda d: d)

  assert list(datasets[0].as_numpy_iterator()) == [8, 10]


def test_client_shuffle_seed_is_sha256_of_seed_round_and_client():
  # The first 8 bytes of SHA-256("7/3/alice"), big-endian, >> 1 (63 bits).
  digest = hashlib.sha256(b'7/3/alice').digest()
  expected = int.from_bytes(digest[:8], 'big') // 2
  assert sampling.client_shuffle_seed(7, 3, 'alice') == expected
  assert 0 <= expected < 2**63
  assert sampling.client_keys(['alice', 'b/c'], 7, 3) == [
      f'{expected}/alice',
      f'{sampling.client_shuffle_seed(7, 3, "b/c")}/b/c',
  ]


def _orders(datasets):
  return [
      np.concatenate(list(d.as_numpy_iterator())).tolist() for d in datasets
  ]


def test_round_seeds_give_a_client_a_new_order_each_round_and_epoch():
  # Client '0' holds 0..19; 2 epochs in batches of 4.
  client_data = tff.simulation.datasets.TestClientData(
      {'0': list(range(20)), '1': list(range(20, 40))}
  )
  preprocess_fn = task_lib.batching_fn(4, 2, seed=0)
  rounds = [
      _orders(
          sampling.client_datasets(
              client_data, ['0'], preprocess_fn, seed=3, round_num=t
          )
      )[0]
      for t in (1, 2, 1)
  ]
  first, second, again = rounds
  assert first == again  # (seed, round, client) decides the order.
  assert first != second
  for order in (first, second):
    assert sorted(order[:20]) == sorted(order[20:]) == list(range(20))
    assert order[:20] != order[20:]  # Each epoch its own order.
  # Without a round the preprocessing keeps its one seeded order.
  fixed = _orders(
      sampling.client_datasets(client_data, ['0', '0'], preprocess_fn)
  )
  assert fixed[0] == fixed[1]


def test_keyed_dataset_computation_builds_the_drivers_datasets():
  client_data = tff.simulation.datasets.TestClientData(
      {'a/b': list(range(10)), 'c': list(range(10, 30))}
  )
  preprocess_fn = task_lib.batching_fn(3, 2, seed=0)
  ids = ['c', 'a/b']
  computation = sampling.keyed_dataset_computation(client_data, preprocess_fn)
  codes = _worker_codes(computation, sampling.client_keys(ids, 5, 9))
  drivers = sampling.client_datasets(
      client_data, ids, preprocess_fn, seed=5, round_num=9
  )
  assert codes == [_code(order) for order in _orders(drivers)]


def _code(order):
  """A client's elements in order as one code: Horner's rule in base 31
  modulo the prime 1,000,003 (no overflow in int64)."""
  value = 0
  for x in order:
    value = (value * 31 + x) % _P
  return value


def _worker_codes(computation, keys):
  """`_code` of each key's dataset as the workers' `computation` builds it."""
  element = tff.TensorType(np.int32, [None])

  @tff.federated_computation(tff.FederatedType(np.str_, tff.CLIENTS))
  def worker_orders(keys):
    @tff.tensorflow.computation(tff.SequenceType(element))
    def code(dataset):
      return dataset.unbatch().reduce(
          np.int64(0), lambda acc, x: (acc * 31 + tf.cast(x, tf.int64)) % _P
      )

    return tff.federated_map(code, tff.federated_map(computation, keys))

  return [int(c) for c in worker_orders(keys)]


_P = 1_000_003


def test_epoch_decay_fn_takes_one_epoch_every_period_from_the_start():
  # E = 5, t_s = 10, P = 3: E_t = max(1, 5 - floor(max(0, t - 10) / 3)).
  # t <= 12: 5; 13-15: 4; 16-18: 3; 19-21: 2; from 22 on: 1.
  epochs = sampling.epoch_decay_fn(5, 10, 3)
  assert [epochs(t) for t in (1, 10, 12, 13, 15, 16, 19, 21, 22, 100)] == [
      5,
      5,
      5,
      4,
      4,
      3,
      2,
      2,
      1,
      1,
  ]


def test_round_epochs_reach_the_drivers_and_the_workers_datasets():
  # 'c' holds 10 examples, 'a/b' 7; batches of 3 from a 4-epoch default.
  client_data = tff.simulation.datasets.TestClientData(
      {'a/b': list(range(7)), 'c': list(range(10, 20))}
  )
  preprocess_fn = task_lib.batching_fn(3, 4, seed=0)
  ids = ['c', 'a/b']
  assert sampling.takes_epochs(preprocess_fn)
  assert sampling.client_keys(ids, 5, 9, epochs=2)[1] == (
      f'{sampling.client_shuffle_seed(5, 9, "a/b")}/2/a/b'
  )
  drivers = sampling.round_client_data(
      client_data,
      ids,
      preprocess_fn,
      seed=5,
      round_num=9,
      by_id=False,
      epochs=2,
  )
  orders = _orders(drivers)
  # Two epochs: each client's examples exactly twice, in 2 * n / 3 batches
  # rounded up (10 -> 7 batches, 7 -> 5).
  assert [sorted(o) for o in orders] == [
      sorted(list(range(10, 20)) * 2),
      sorted(list(range(7)) * 2),
  ]
  assert [len(list(d)) for d in drivers] == [7, 5]
  # The first epoch is the 4-epoch stream's first (the same seeded order).
  full = _orders(
      sampling.client_datasets(
          client_data, ids, preprocess_fn, seed=5, round_num=9
      )
  )
  assert orders[0][:10] == full[0][:10]
  # The workers build the same datasets from the keys.
  computation = sampling.keyed_dataset_computation(
      client_data, preprocess_fn, with_epochs=True
  )
  keys = sampling.round_client_data(
      client_data,
      ids,
      preprocess_fn,
      seed=5,
      round_num=9,
      by_id=True,
      epochs=2,
  )
  assert _worker_codes(computation, keys) == [_code(o) for o in orders]
