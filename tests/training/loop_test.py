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
from tff_fedwin.algorithms import scaffold

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
