"""Tests for tff_fedwin.training.sampling: which clients train in a round."""

import math
import sqlite3

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
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
