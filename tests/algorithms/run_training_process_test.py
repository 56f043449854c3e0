"""`tff.simulation.run_training_process` drives our window processes (issue 45).

On tests/softmax_task.py (5 clients, all in every round), for `build_fed_win`
and TFF's `build_weighted_fed_avg` with `WindowedModelAveragingFactory`
(W = 3, 5 rounds): the loop calls back once per round, and the window model
of the returned state is the numpy mean of the last 3 global models the
evaluation callback saw.
"""

import asyncio

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.aggregators import WindowedModelAveragingFactory
from tff_fedwin.algorithms import fed_win

WINDOW_SIZE = 3
ROUNDS = 5


def _process(builder):
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=0.5)
  if builder == 'fed_win':
    return fed_win.build_fed_win(task.model_fn, sgd, window_size=WINDOW_SIZE)
  return tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn,
      sgd,
      model_aggregator=WindowedModelAveragingFactory(WINDOW_SIZE),
  )


@pytest.fixture(autouse=True)
def _event_loop():
  """A current event loop, which TFF's `run_training_process` needs.

  It calls `asyncio.get_event_loop()`, which raises "There is no current
  event loop" once an earlier `asyncio.run` in this process (e.g. a
  `train_model` test on the same pytest worker) has set it to None.
  """
  # Left current and open afterwards, as run_training_process leaves the
  # default loop: later tests on this worker see what they saw before.
  asyncio.set_event_loop(asyncio.new_event_loop())


@pytest.mark.parametrize('builder', ['fed_win', 'tff_weighted_fed_avg'])
def test_run_training_process_keeps_the_window(builder):
  training_rounds, evaluation_rounds, global_models = [], [], []

  def training_selection_fn(round_num):
    training_rounds.append(round_num)
    return task.datasets(task.CLIENT_IDS)

  def evaluation_selection_fn(round_num):
    evaluation_rounds.append(round_num)
    return None

  def evaluation_fn(state, unused_data):
    global_models.append(task.leaves(state.global_model_weights.trainable))
    return task.evaluate_fn(state.global_model_weights)

  metrics = tff.program.MemoryReleaseManager()
  final_state = tff.simulation.run_training_process(
      _process(builder),
      training_selection_fn,
      total_rounds=ROUNDS,
      evaluation_fn=evaluation_fn,
      evaluation_selection_fn=evaluation_selection_fn,
      metrics_managers=[metrics],
  )
  assert training_rounds == list(range(1, ROUNDS + 1))
  assert evaluation_rounds == list(range(ROUNDS + 1))  # Round 0: initial.
  assert list(metrics.values()) == list(range(ROUNDS + 1))
  # The last evaluation saw the returned state's global model.
  for got, want in zip(
      task.leaves(final_state.global_model_weights.trainable),
      global_models[-1],
  ):
    np.testing.assert_array_equal(got, want)
  assert not np.allclose(global_models[-1][0], global_models[-2][0])
  window = task.leaves(window_model_weights(final_state).trainable)
  for i, got in enumerate(window):
    want = np.mean([g[i] for g in global_models[-WINDOW_SIZE:]], axis=0)
    np.testing.assert_allclose(got, want, atol=1e-6)
  if builder == 'fed_win':
    # The window holds min(t, W) models after round t (W = 3).
    fills = [
        int(metrics.values()[t]['finalizer']['window']['window_fill'])
        for t in range(1, ROUNDS + 1)
    ]
    assert fills == [1, 2, 3, 3, 3]
