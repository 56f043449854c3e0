"""Tests for tff_fedwin.data.from_ids."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import data

_IDS = ['1', '2']
# Client k holds 10k, ..., 11k (computed from the id in the graph, as a
# seeded generator would): '1' -> 10, 11 and '2' -> 20, 21, 22.
_VALUES = {'1': [10, 11], '2': [20, 21, 22]}


def _dataset_from_id(client_id):
  k = tf.strings.to_number(client_id, tf.int64)
  return tf.data.Dataset.range(10 * k, 11 * k + 1).map(
      lambda v: collections.OrderedDict(v=v)
  )


def _client_data():
  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      _IDS, _dataset_from_id
  )


def _values(dataset):
  return [int(e['v']) for e in dataset.as_numpy_iterator()]


def test_declares_datasets_from_ids_and_keeps_ids_and_structure():
  wrapped = data.datasets_from_ids(_client_data())
  assert type(wrapped).DATASETS_FROM_IDS is True
  assert wrapped.client_ids == _IDS
  assert wrapped.element_type_structure == collections.OrderedDict(
      v=tf.TensorSpec([], tf.int64)
  )


@pytest.mark.parametrize('client', _IDS)
def test_gives_each_clients_dataset(client):
  wrapped = data.datasets_from_ids(_client_data())
  assert _values(wrapped.create_tf_dataset_for_client(client)) == (
      _VALUES[client]
  )
  assert _values(wrapped.serializable_dataset_fn(client)) == _VALUES[client]


def test_preprocessed_dataset_computation_gives_the_dataset():
  wrapped = data.datasets_from_ids(_client_data())
  computation = wrapped.preprocess(lambda d: d.batch(2)).dataset_computation
  batches = [list(b['v']) for b in computation('2')]
  np.testing.assert_array_equal(np.concatenate(batches), _VALUES['2'])
  assert [len(b) for b in batches] == [2, 1]


def test_unknown_client_is_refused():
  with pytest.raises(ValueError, match='nobody'):
    data.datasets_from_ids(_client_data()).create_tf_dataset_for_client(
        'nobody'
    )


def test_rejects_what_is_not_a_client_data():
  with pytest.raises(ValueError, match='`client_data` must be'):
    data.datasets_from_ids([1, 2])
