"""Tests for tff_fedwin.data.partition: Dirichlet label partitions, ClientData."""

import collections
import math

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin import data

_NUM_CLASSES = 10
# Class c has 500 + 100 * c examples: a non-uniform global histogram, so that
# "close to the global histogram" is not the same as "uniform".
_CLASS_SIZES = 500 + 100 * np.arange(_NUM_CLASSES)
_ALPHAS = (0.0, 0.05, 1.0, 1e4, math.inf)


def _labels(sizes=_CLASS_SIZES, seed=0):
  """Shuffled labels with `sizes[c]` examples of class c, shape [sum(sizes)]."""
  labels = np.repeat(np.arange(len(sizes)), sizes)
  return np.random.default_rng(seed).permutation(labels)


def _histogram(labels):
  return np.bincount(labels, minlength=_NUM_CLASSES)


@pytest.mark.parametrize('alpha', _ALPHAS)
def test_partition_is_disjoint_and_covers_every_index(alpha):
  labels = _labels()
  partition = data.dirichlet_label_partition(
      labels, num_clients=20, alpha=alpha, seed=3
  )
  everything = np.concatenate(partition)
  assert everything.size == labels.size  # no index twice ...
  np.testing.assert_array_equal(np.sort(everything), np.arange(labels.size))


@pytest.mark.parametrize('alpha', _ALPHAS)
def test_one_sorted_int64_array_per_client(alpha):
  partition = data.dirichlet_label_partition(
      _labels(), num_clients=20, alpha=alpha, seed=3
  )
  assert len(partition) == 20
  for indices in partition:
    assert indices.dtype == np.int64
    assert indices.ndim == 1
    assert np.all(np.diff(indices) > 0)


@pytest.mark.parametrize('alpha', _ALPHAS)
def test_same_seed_gives_identical_partition(alpha):
  first = data.dirichlet_label_partition(_labels(), 20, alpha, seed=7)
  second = data.dirichlet_label_partition(_labels(), 20, alpha, seed=7)
  for a, b in zip(first, second, strict=True):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('alpha', _ALPHAS)
def test_other_seed_gives_other_partition(alpha):
  first = data.dirichlet_label_partition(_labels(), 20, alpha, seed=7)
  second = data.dirichlet_label_partition(_labels(), 20, alpha, seed=8)
  assert any(
      not np.array_equal(a, b) for a, b in zip(first, second, strict=True)
  )


def test_clients_without_examples_are_kept_as_empty_arrays():
  # 3 examples cannot fill 10 clients: at least 7 are empty, and still listed.
  partition = data.dirichlet_label_partition(
      np.array([0, 1, 1]), num_clients=10, alpha=0.1, seed=0
  )
  assert len(partition) == 10
  empty = [indices for indices in partition if indices.size == 0]
  assert len(empty) >= 7
  assert all(indices.dtype == np.int64 for indices in empty)


@pytest.mark.parametrize('seed', range(3))
def test_alpha_zero_gives_one_class_per_client(seed):
  labels = _labels()
  partition = data.dirichlet_label_partition(labels, 25, alpha=0, seed=seed)
  for indices in partition:
    if indices.size:
      assert np.unique(labels[indices]).size == 1


@pytest.mark.parametrize('seed', range(3))
def test_alpha_zero_deals_classes_round_robin(seed):
  labels = _labels()
  partition = data.dirichlet_label_partition(labels, 25, alpha=0, seed=seed)
  holders = collections.Counter(
      int(labels[indices[0]]) for indices in partition
  )
  # 25 clients dealt 10 classes: every class present, 5 classes on 3 clients
  # and 5 on 2.
  assert sorted(holders) == list(range(_NUM_CLASSES))
  assert sorted(holders.values()) == [2] * 5 + [3] * 5


@pytest.mark.parametrize('seed', range(3))
def test_alpha_zero_splits_each_class_evenly(seed):
  labels = _labels()
  partition = data.dirichlet_label_partition(labels, 25, alpha=0, seed=seed)
  sizes = collections.defaultdict(list)
  for indices in partition:
    sizes[int(labels[indices[0]])].append(indices.size)
  for label, class_sizes in sizes.items():
    assert sum(class_sizes) == _CLASS_SIZES[label]
    assert max(class_sizes) - min(class_sizes) <= 1


def test_alpha_zero_with_fewer_clients_than_classes_raises():
  with pytest.raises(ValueError, match='alpha.*num_clients'):
    data.dirichlet_label_partition(_labels(), 9, alpha=0, seed=0)


@pytest.mark.parametrize('seed', range(3))
def test_large_alpha_matches_global_histogram(seed):
  labels = _labels()
  global_fractions = _histogram(labels) / labels.size
  partition = data.dirichlet_label_partition(labels, 10, alpha=1e4, seed=seed)
  # Tolerance: with K=10 clients, Dir(1e4) shares are 1/K with relative
  # standard deviation sqrt((K - 1) / (K * alpha + 1)) ~= 0.0095, so a client's
  # fraction of class c (<= 0.15) moves by ~0.0015 per standard deviation;
  # flooring the split points moves each count by < 1 of ~1,400 examples
  # (< 0.0008). 0.01 is more than 5 standard deviations.
  for indices in partition:
    client_fractions = _histogram(labels[indices]) / indices.size
    np.testing.assert_allclose(client_fractions, global_fractions, atol=0.01)


@pytest.mark.parametrize('seed', range(5))
def test_small_alpha_skews_clients(seed):
  labels = _labels(sizes=[1000] * _NUM_CLASSES)
  partition = data.dirichlet_label_partition(labels, 100, alpha=0.05, seed=seed)
  max_class_fractions = [
      _histogram(labels[indices]).max() / indices.size
      for indices in partition
      if indices.size
  ]
  # IID clients would have a max-class fraction near 0.1. With each class split
  # by Dir(0.05) over 100 clients, a class lands on a few clients, but clients
  # still collect chunks of several classes: the mean over non-empty clients
  # measured 0.75-0.82 over seeds 0-49.
  assert np.mean(max_class_fractions) > 0.7


@pytest.mark.parametrize(
    'kwargs, argument',
    [
        (dict(labels=np.zeros([4, 2], np.int64)), 'labels'),
        (dict(labels=np.zeros([4], np.float32)), 'labels'),
        (dict(num_clients=0), 'num_clients'),
        (dict(num_clients=2.5), 'num_clients'),
        (dict(num_clients=True), 'num_clients'),
        (dict(alpha=-0.1), 'alpha'),
        (dict(alpha=math.nan), 'alpha'),
        (dict(alpha='1'), 'alpha'),
        (dict(seed=-1), 'seed'),
        (dict(seed=1.5), 'seed'),
    ],
)
def test_bad_argument_raises_naming_it(kwargs, argument):
  args = dict(labels=np.zeros([4], np.int64), num_clients=2, alpha=1.0, seed=0)
  args.update(kwargs)
  with pytest.raises(ValueError, match=f'`{argument}`'):
    data.dirichlet_label_partition(**args)


def _arrays(num_examples=12):
  """Features [N, 2, 3] float32 with row i filled with i; labels i % 4."""
  x = np.broadcast_to(
      np.arange(num_examples, dtype=np.float32)[:, None, None],
      [num_examples, 2, 3],
  ).copy()
  y = (np.arange(num_examples) % 4).astype(np.int32)
  return x, y


_PARTITION = [
    np.array([0, 5, 7], np.int64),
    np.array([], np.int64),
    np.array([11, 1, 2, 3], np.int64),
]


def _dataset_rows(dataset):
  rows = list(dataset.as_numpy_iterator())
  return [row['x'] for row in rows], [row['y'] for row in rows]


def test_default_client_ids_are_zero_padded():
  client_data = data.client_data_from_partition(*_arrays(), _PARTITION)
  assert client_data.client_ids == ['0000', '0001', '0002']


def test_default_client_ids_widen_past_four_digits():
  assert data.default_client_ids(10001)[-1] == '10000'


@pytest.mark.parametrize('client', [0, 2])
def test_client_dataset_holds_the_partition_rows(client):
  x, y = _arrays()
  client_data = data.client_data_from_partition(x, y, _PARTITION)
  xs, ys = _dataset_rows(
      client_data.create_tf_dataset_for_client(client_data.client_ids[client])
  )
  np.testing.assert_array_equal(np.stack(xs), x[_PARTITION[client]])
  np.testing.assert_array_equal(np.stack(ys), y[_PARTITION[client]])


def test_elements_are_single_examples():
  x, y = _arrays()
  client_data = data.client_data_from_partition(x, y, _PARTITION)
  spec = client_data.element_type_structure
  assert list(spec) == ['x', 'y']
  assert spec['x'] == tf.TensorSpec([2, 3], tf.float32)
  assert spec['y'] == tf.TensorSpec([], tf.int32)


def test_empty_client_has_empty_dataset():
  client_data = data.client_data_from_partition(*_arrays(), _PARTITION)
  dataset = client_data.create_tf_dataset_for_client('0001')
  assert not list(dataset.as_numpy_iterator())


def test_custom_client_ids():
  x, y = _arrays()
  client_data = data.client_data_from_partition(
      x, y, _PARTITION, client_ids=['a', 'b', 'c']
  )
  assert client_data.client_ids == ['a', 'b', 'c']
  _, ys = _dataset_rows(client_data.create_tf_dataset_for_client('c'))
  np.testing.assert_array_equal(ys, [3, 1, 2, 3])  # labels i % 4 of 11,1,2,3


@pytest.mark.parametrize('client', ['0000', '0001', '0002'])
def test_serializable_dataset_fn_in_graph_matches_numpy(client):
  x, y = _arrays()
  client_data = data.client_data_from_partition(x, y, _PARTITION)
  indices = _PARTITION[int(client)]

  @tf.function
  def dataset_for(client_id):
    return client_data.serializable_dataset_fn(client_id).reduce(
        (tf.constant(0.0), tf.constant(0)),
        lambda acc, e: (acc[0] + tf.reduce_sum(e['x']), acc[1] + e['y']),
    )

  x_sum, y_sum = dataset_for(tf.constant(client))
  assert float(x_sum) == float(x[indices].sum())
  assert int(y_sum) == int(y[indices].sum())


def test_dataset_computation_runs_on_the_tff_worker():
  x, y = _arrays()
  client_data = data.client_data_from_partition(x, y, _PARTITION)
  elements = client_data.dataset_computation('0002')
  np.testing.assert_array_equal(
      np.stack([e['x'] for e in elements]), x[_PARTITION[2]]
  )


@pytest.mark.parametrize(
    'kwargs, argument',
    [
        (dict(y=np.zeros([5], np.int32)), '`x` and `y`'),
        (dict(partition=[]), '`partition`'),
        (dict(partition=[np.array([0, 12])]), r'`partition\[0\]`'),
        (dict(partition=[np.array([-1])]), r'`partition\[0\]`'),
        (dict(partition=[np.array([0.5])]), r'`partition\[0\]`'),
        (dict(client_ids=['a', 'b']), '`client_ids`'),
        (dict(client_ids=['a', 'a', 'b']), '`client_ids`'),
    ],
)
def test_client_data_bad_argument_raises_naming_it(kwargs, argument):
  x, y = _arrays()
  args = dict(x=x, y=y, partition=_PARTITION)
  args.update(kwargs)
  with pytest.raises(ValueError, match=argument):
    data.client_data_from_partition(**args)


def test_unknown_client_id_raises():
  client_data = data.client_data_from_partition(*_arrays(), _PARTITION)
  with pytest.raises(ValueError, match='nope'):
    client_data.create_tf_dataset_for_client('nope')


def test_unknown_client_id_in_graph_raises():
  client_data = data.client_data_from_partition(*_arrays(), _PARTITION)

  @tf.function
  def count(client_id):
    return client_data.serializable_dataset_fn(client_id).reduce(
        0, lambda acc, _: acc + 1
    )

  with pytest.raises(tf.errors.InvalidArgumentError, match='Unknown client'):
    count(tf.constant('nope'))
