"""Tests for tff_fedwin.training.loop.run_training: sampling and client states.

The task is tests/softmax_task.py. Expected values come from numpy
written here: the sampled ids from `np.random.default_rng([seed, t])`, the
client states from the states the process returned.
"""

import math
import os

import numpy as np

from tests import softmax_task as task
from tests.training import loop_fixtures
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold
from tff_fedwin.tasks import task as task_lib

CLIENT_IDS = task.CLIENT_IDS
_leaves = task.leaves
_runner = loop_fixtures.make_runner
_run = loop_fixtures.run


def test_each_round_trains_the_sampled_clients_preprocessed_datasets(
    processes, tmp_path
):
  runner = _runner(processes, 'fedavg')

  _run(runner, tmp_path, total_rounds=3, seed=7, clients_per_round=3)

  for t, (ids, num_batches) in enumerate(
      zip(runner.client_ids, runner.num_batches), start=1
  ):
    indices = np.random.default_rng([7, t]).choice(5, size=3, replace=False)
    assert ids == [CLIENT_IDS[i] for i in indices]
    assert num_batches == [
        math.ceil(task.CLIENT_SIZES[i] / task.BATCH_SIZE) for i in indices
    ]
  assert len(runner.client_ids) == 3


def test_client_epochs_fn_sets_each_rounds_local_epochs(processes, tmp_path):
  runner = _runner(processes, 'fedavg')
  # E_t = 3, 2, 1 in rounds 1-3 (IMA's epoch decay with P = 1 from t_s = 1).
  epochs_of_round = {1: 3, 2: 2, 3: 1}

  _run(
      runner,
      tmp_path,
      total_rounds=3,
      seed=7,
      clients_per_round=3,
      preprocess_fn=task_lib.batching_fn(task.BATCH_SIZE, 5, seed=0),
      client_epochs_fn=epochs_of_round.__getitem__,
  )

  for t, num_batches in enumerate(runner.num_batches, start=1):
    indices = np.random.default_rng([7, t]).choice(5, size=3, replace=False)
    # E_t passes over n_i examples in batches of B: ceil(E_t n_i / B).
    assert num_batches == [
        math.ceil(epochs_of_round[t] * task.CLIENT_SIZES[i] / task.BATCH_SIZE)
        for i in indices
    ]


def test_runner_without_client_states_gets_none_and_no_state_files(
    processes, tmp_path
):
  runner = _runner(processes, 'fedavg')

  _run(runner, tmp_path, total_rounds=2)

  assert runner.client_states_in == [None, None]
  checkpoint_files = os.listdir(
      os.path.join(str(tmp_path), 'exp', 'checkpoints')
  )
  assert not [n for n in checkpoint_files if n.startswith('client_states_')]


def test_each_round_gets_the_last_returned_states_of_its_clients(
    processes, tmp_path
):
  runner = _runner(processes, 'scaffold')
  template = scaffold.initial_client_state(task.model_fn)

  _run(runner, tmp_path, total_rounds=6, clients_per_round=3)

  latest = {}
  seen_again = 0
  for ids, states_in, states_out in zip(
      runner.client_ids, runner.client_states_in, runner.client_states_out
  ):
    for client_id, state in zip(ids, states_in):
      expected = latest.get(client_id, template)
      seen_again += client_id in latest
      for a, e in zip(_leaves(state), _leaves(expected)):
        np.testing.assert_array_equal(a, e)
    latest.update(zip(ids, states_out))
  assert seen_again >= 3  # Clients come back with their own states.


class _OrderRecordingRunner(loop_fixtures.RecordingRunner):
  """Also records the x rows each client trained on, in order."""

  def __init__(self, inner):
    super().__init__(inner)
    self.rows = []  # Per round: {client id: [row index, ...]}.

  def run_round(self, state, datasets, client_states):
    orders = {}
    for ds in datasets:
      # One whole pass, the dataset's first, before any other reads it: what
      # the worker reads from its fresh copy (later passes reshuffle).
      rows = [
          int(np.flatnonzero(np.all(task.TRAIN_X == x, axis=1))[0])
          for batch in ds
          for x in batch['x'].numpy()
      ]
      client = next(
          k for k, part in enumerate(task.PARTITION) if rows[0] in part
      )
      orders[CLIENT_IDS[client]] = rows
    self.rows.append(orders)
    return super().run_round(state, datasets, client_states)


def test_a_client_picked_twice_trains_on_two_orders_and_a_rerun_on_the_same(
    processes, tmp_path
):
  # A task's preprocess_fn takes the round's shuffle seed: every client is
  # picked in both rounds (5 of 5), 2 epochs each.
  preprocess_fn = task_lib.batching_fn(task.BATCH_SIZE, 2, seed=0)
  runs = []
  for name in ('first', 'rerun'):
    runner = _OrderRecordingRunner(
        runners.LearningProcessRunner(processes['fedavg'])
    )
    _run(
        runner,
        tmp_path / name,
        total_rounds=2,
        clients_per_round=5,
        preprocess_fn=preprocess_fn,
    )
    runs.append(runner.rows)
  assert runs[0] == runs[1]  # Reproducible.
  largest = CLIENT_IDS[4]  # 12 examples: two equal orders by chance 1/12!.
  own_rows = task.PARTITION[4].tolist()
  first, second = (rows[largest] for rows in runs[0])
  for order in (first, second):
    # Each epoch a permutation of the client's rows, in its own order.
    assert sorted(order[:12]) == sorted(order[12:]) == own_rows
    assert order[:12] != order[12:]
  assert first != second  # Round 2 does not repeat round 1's order.
