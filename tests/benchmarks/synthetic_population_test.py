"""Tests for benchmarks.synthetic_population (no TFF worker)."""

import numpy as np
import pytest
import tensorflow as tf

from benchmarks import synthetic_population


def _arrays(dataset):
  elements = list(dataset.as_numpy_iterator())
  return (
      np.stack([e['x'] for e in elements]),
      np.array([e['y'] for e in elements]),
  )


def test_client_ids_are_one_padded_index_per_client():
  population = synthetic_population.SyntheticPopulation(12345)
  ids = population.client_ids
  assert len(ids) == 12345
  assert ids[0] == '00000' and ids[-1] == '12344'
  assert len(set(ids)) == 12345


def test_small_populations_have_four_digit_ids():
  ids = synthetic_population.SyntheticPopulation(3).client_ids
  assert ids == ['0000', '0001', '0002']


def test_shapes_and_dtypes():
  population = synthetic_population.SyntheticPopulation(5, 7)
  x, y = _arrays(population.create_tf_dataset_for_client('0003'))
  assert x.shape == (7, 28, 28, 1) and x.dtype == np.float32
  assert y.shape == (7,) and y.dtype == np.int32
  assert 0.0 <= x.min() and x.max() < 1.0
  assert 0 <= y.min() and y.max() < 62


def test_element_type_structure_matches_the_datasets():
  population = synthetic_population.SyntheticPopulation(2)
  dataset = population.create_tf_dataset_for_client('0001')
  assert population.element_type_structure == dataset.element_spec


def test_a_client_gets_the_same_data_every_time():
  population = synthetic_population.SyntheticPopulation(50)
  x1, y1 = _arrays(population.create_tf_dataset_for_client('0042'))
  x2, y2 = _arrays(population.create_tf_dataset_for_client('0042'))
  np.testing.assert_array_equal(x1, x2)
  np.testing.assert_array_equal(y1, y2)


def test_a_client_gets_the_same_data_in_any_population_size():
  # The data depends on (seed, index) alone: O(1) in the population.
  small = synthetic_population.SyntheticPopulation(100)
  large = synthetic_population.SyntheticPopulation(34000)
  x1, y1 = _arrays(small.create_tf_dataset_for_client('0042'))
  x2, y2 = _arrays(large.create_tf_dataset_for_client('00042'))
  np.testing.assert_array_equal(x1, x2)
  np.testing.assert_array_equal(y1, y2)


def test_different_clients_differ():
  population = synthetic_population.SyntheticPopulation(3, 20)
  x0, y0 = _arrays(population.create_tf_dataset_for_client('0000'))
  x1, y1 = _arrays(population.create_tf_dataset_for_client('0001'))
  assert not np.array_equal(x0, x1)
  assert not np.array_equal(y0, y1)


def test_different_seeds_differ():
  a = synthetic_population.SyntheticPopulation(3, seed=0)
  b = synthetic_population.SyntheticPopulation(3, seed=1)
  xa, _ = _arrays(a.create_tf_dataset_for_client('0001'))
  xb, _ = _arrays(b.create_tf_dataset_for_client('0001'))
  assert not np.array_equal(xa, xb)


def test_graph_path_gives_the_same_data():
  population = synthetic_population.SyntheticPopulation(20, 5)

  @tf.function
  def first_batch(client_id):
    dataset = population.serializable_dataset_fn(client_id).batch(5)
    return next(iter(dataset))

  batch = first_batch(tf.constant('0017'))
  x, y = _arrays(population.create_tf_dataset_for_client('0017'))
  np.testing.assert_array_equal(batch['x'].numpy(), x)
  np.testing.assert_array_equal(batch['y'].numpy(), y)


def test_labels_cover_the_classes():
  # 62 classes, 5,000 labels: each class is expected ~80 times.
  population = synthetic_population.SyntheticPopulation(1, 5000)
  _, y = _arrays(population.create_tf_dataset_for_client('0000'))
  assert set(np.unique(y)) == set(range(62))


@pytest.mark.parametrize(
    'client_id', ['0100', '100', '-001', 'abcd', 7, '٠٠٠١']
)
def test_unknown_ids_are_rejected(client_id):
  population = synthetic_population.SyntheticPopulation(100)
  with pytest.raises(ValueError, match='not a client'):
    population.create_tf_dataset_for_client(client_id)


@pytest.mark.parametrize(
    'kwargs, name',
    [
        (dict(num_clients=0), 'num_clients'),
        (dict(num_clients=2, examples_per_client=0), 'examples_per_client'),
        (dict(num_clients=2, seed=-1), 'seed'),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
  with pytest.raises(ValueError, match=name):
    synthetic_population.SyntheticPopulation(**kwargs)


def test_test_dataset_is_batched_and_shaped():
  dataset = synthetic_population.synthetic_test_dataset(25, 10)
  sizes = [b['y'].shape[0] for b in dataset.as_numpy_iterator()]
  assert sizes == [10, 10, 5]
