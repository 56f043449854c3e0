"""Tests for tff_fedwin.training.sampling: which clients train in a round."""

import math

import numpy as np
import pytest

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
