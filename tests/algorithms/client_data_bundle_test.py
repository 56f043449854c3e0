"""Tests for tff_fedwin.algorithms.client_data_bundle.

Expected examples come from the numpy arrays of tests/softmax_task.py indexed
by its partition (client k holds rows PARTITION[k]), not from the ClientData
that was written.
"""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin import data
from tff_fedwin.algorithms import client_data_bundle
from tff_fedwin.data import client_data_from_partition


def _examples(client):
  """Client k's rows of the task's arrays, as numpy."""
  k = task.CLIENT_IDS.index(client)
  return task.TRAIN_X[task.PARTITION[k]], task.TRAIN_Y[task.PARTITION[k]]


def _stacked(dataset):
  elements = list(dataset.as_numpy_iterator())
  return (
      np.array([e['x'] for e in elements]).reshape(-1, task.NUM_FEATURES),
      np.array([e['y'] for e in elements], np.int32).reshape(-1),
  )


# One byte: every client its own chunk, merged from 5 bundles; the default:
# one bundle.
@pytest.fixture(scope='module', params=[1, None], ids=['chunked', 'one_chunk'])
def bundle(request, tmp_path_factory):
  kwargs = {} if request.param is None else dict(chunk_bytes=request.param)
  prefix = str(tmp_path_factory.mktemp('bundle') / 'clients')
  return client_data_bundle.write_client_data_bundle(
      task.CLIENT_DATA, prefix, **kwargs
  )


class TestWriteClientDataBundle:

  def test_each_client_reads_its_examples_in_order(self, bundle):
    for client in task.CLIENT_IDS:
      x, y = _stacked(bundle.create_tf_dataset_for_client(client))
      expected_x, expected_y = _examples(client)
      np.testing.assert_array_equal(x, expected_x)
      np.testing.assert_array_equal(y, expected_y)

  def test_keeps_ids_and_element_structure(self, bundle):
    assert bundle.client_ids == task.CLIENT_IDS
    assert bundle.element_type_structure == collections.OrderedDict(
        x=tf.TensorSpec([task.NUM_FEATURES], tf.float32),
        y=tf.TensorSpec([], tf.int32),
    )

  def test_worker_builds_the_preprocessed_dataset(self, bundle):
    client = task.CLIENT_IDS[2]  # 8 examples: batches of 3, 3 and 2.
    computation = bundle.preprocess(task.preprocess_fn).dataset_computation
    batches = list(computation(client))
    x, y = _examples(client)
    assert [len(b['y']) for b in batches] == [3, 3, 2]
    np.testing.assert_array_equal(np.concatenate([b['x'] for b in batches]), x)
    np.testing.assert_array_equal(np.concatenate([b['y'] for b in batches]), y)

  def test_files_are_private_and_absolute(self, bundle):
    assert os.path.isabs(bundle.prefix)
    files = [
        f
        for f in os.listdir(os.path.dirname(bundle.prefix))
        if f.startswith('clients.')
    ]
    assert 'clients.index' in files
    for name in files:
      path = os.path.join(os.path.dirname(bundle.prefix), name)
      assert os.stat(path).st_mode & 0o777 == 0o600

  def test_unknown_id_names_its_tensor(self, bundle):
    with pytest.raises(tf.errors.NotFoundError, match='0/nobody'):
      bundle.serializable_dataset_fn('nobody')


def test_client_without_examples_has_an_empty_dataset(tmp_path):
  client_data = client_data_from_partition(
      task.TRAIN_X, task.TRAIN_Y, [np.arange(3), np.array([], np.int64)]
  )
  bundle = client_data_bundle.write_client_data_bundle(
      client_data, str(tmp_path / 'b')
  )
  assert not list(bundle.create_tf_dataset_for_client(bundle.client_ids[1]))
  np.testing.assert_array_equal(
      _stacked(bundle.create_tf_dataset_for_client(bundle.client_ids[0]))[0],
      task.TRAIN_X[:3],
  )


def test_clients_read_in_several_batches_keep_their_examples(
    tmp_path, monkeypatch
):
  # Batches of 5 examples: the 12-example client is read as 5 + 5 + 2.
  monkeypatch.setattr(client_data_bundle, '_READ_BATCH', 5)
  bundle = client_data_bundle.write_client_data_bundle(
      task.CLIENT_DATA, str(tmp_path / 'b')
  )
  client = task.CLIENT_IDS[4]
  x, y = _stacked(bundle.create_tf_dataset_for_client(client))
  np.testing.assert_array_equal(x, _examples(client)[0])
  np.testing.assert_array_equal(y, _examples(client)[1])


def test_a_rewrite_replaces_every_shard(tmp_path):
  prefix = str(tmp_path / 'b')
  client_data_bundle.write_client_data_bundle(
      task.CLIENT_DATA, prefix, chunk_bytes=1
  )
  assert len([f for f in os.listdir(tmp_path) if '.data-' in f]) == 5
  client_data_bundle.write_client_data_bundle(task.CLIENT_DATA, prefix)
  assert sorted(os.listdir(tmp_path)) == [
      'b.data-00000-of-00001',
      'b.index',
  ]


def _ragged_client_data():
  """Examples of varying length: no fully defined shape."""
  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      ['a'],
      lambda _: tf.data.Dataset.range(3).map(lambda n: tf.range(n)),
  )


@pytest.mark.parametrize(
    'client_data, kwargs, match',
    [
        ([], {}, 'must be a tff.simulation.datasets.ClientData'),
        (task.CLIENT_DATA, dict(chunk_bytes=0), 'chunk_bytes'),
        (_ragged_client_data(), {}, 'leaf 0'),
    ],
    ids=['not_client_data', 'chunk_bytes', 'shape_not_defined'],
)
def test_rejects_bad_input(tmp_path, client_data, kwargs, match):
  with pytest.raises(ValueError, match=match):
    client_data_bundle.write_client_data_bundle(
        client_data, str(tmp_path / 'b'), **kwargs
    )
  assert not os.listdir(tmp_path)


def _sql_client_data(directory):
  database = str(directory / 'clients.sqlite')
  tff.simulation.datasets.save_to_sql_client_data(
      task.CLIENT_IDS, task.CLIENT_DATA.serializable_dataset_fn, database
  )
  return tff.simulation.datasets.SqlClientData(database)


@pytest.mark.parametrize(
    'make, expected',
    [
        (
            lambda d: client_data_bundle.write_client_data_bundle(
                task.CLIENT_DATA, str(d / 'b')
            ),
            True,
        ),
        (_sql_client_data, True),
        # Declared (e.g. TFF's SqlClientData(...).preprocess(parse)).
        (lambda d: data.datasets_from_ids(task.CLIENT_DATA), True),
        # In memory: TFF traces its examples into dataset_computation.
        (lambda d: task.CLIENT_DATA, False),
        # TFF's preprocess wrapper hides what it wraps: not declared, not
        # known.
        (lambda d: _sql_client_data(d).preprocess(lambda x: x), False),
    ],
    ids=['bundle', 'sql', 'declared', 'in_memory', 'undeclared_wrapper'],
)
def test_builds_datasets_from_ids(tmp_path, make, expected):
  assert client_data_bundle.builds_datasets_from_ids(make(tmp_path)) is expected
