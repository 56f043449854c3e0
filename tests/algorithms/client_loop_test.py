"""Tests for `client_loop.client_loop`: which loop a client runs.

WSM reads its dataset twice (class proportions, then training). With the
iterator loop the training pass's shuffle order depended on what the TFF
worker had run before; the execution test below re-runs one round (CE on the
iterator, WSM on the reduce) on the same worker and requires the same numbers
bit for bit (with the iterator, the WSM case fails).
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import scaffold

REDUCE = tff.learning.LoopImplementation.DATASET_REDUCE
ITERATOR = tff.learning.LoopImplementation.DATASET_ITERATOR


class TestClientLoopArguments:

  @pytest.mark.parametrize(
      'client_loss,expected', [('ce', ITERATOR), ('wsm', REDUCE)]
  )
  def test_none_picks_the_loop_of_the_loss(self, client_loss, expected):
    assert client_loop.client_loop(None, client_loss) == expected

  @pytest.mark.parametrize('client_loss', ['ce', 'wsm'])
  def test_reduce_is_kept(self, client_loss):
    assert client_loop.client_loop(REDUCE, client_loss) == REDUCE

  def test_iterator_is_kept_with_ce(self):
    assert client_loop.client_loop(ITERATOR, 'ce') == ITERATOR

  @pytest.mark.parametrize(
      'loop,client_loss,message',
      [
          (
              ITERATOR,
              'wsm',
              "DATASET_ITERATOR is not allowed with client_loss='wsm'",
          ),
          ('iterator', 'ce', 'must be one of'),
      ],
  )
  def test_refuses(self, loop, client_loss, message):
    with pytest.raises(ValueError, match=message):
      client_loop.client_loop(loop, client_loss)

  @pytest.mark.parametrize(
      'build',
      [
          lambda loop: fed_win.build_fed_win(
              task.model_fn,
              tff.learning.optimizers.build_sgdm(0.1),
              client_loss='wsm',
              num_classes=task.NUM_CLASSES,
              loop_implementation=loop,
          ),
          lambda loop: scaffold.build_scaffold(
              task.model_fn,
              client_learning_rate=0.1,
              total_clients=task.NUM_CLIENTS,
              client_loss='wsm',
              num_classes=task.NUM_CLASSES,
              loop_implementation=loop,
          ),
      ],
      ids=['build_fed_win', 'build_scaffold'],
  )
  def test_builders_refuse_the_iterator_with_wsm(self, build):
    with pytest.raises(ValueError, match='loop_implementation'):
      build(ITERATOR)


def _shuffled_datasets():
  """Every client's examples, shuffled with one fixed seed, 2 epochs."""
  return [
      task.CLIENT_DATA.create_tf_dataset_for_client(c)
      .shuffle(100, seed=5)
      .repeat(2)
      .batch(task.BATCH_SIZE)
      for c in task.CLIENT_IDS
  ]


class TestClientLoopExecution:

  @pytest.mark.parametrize('client_loss', ['ce', 'wsm'])
  def test_round_does_not_depend_on_the_workers_history(self, client_loss):
    # 'ce' runs the iterator (one pass), 'wsm' the reduce (two passes).
    process = fed_win.build_fed_win(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(0.1),
        client_loss=client_loss,
        num_classes=task.NUM_CLASSES,
    )
    state = process.initialize()
    first = process.next(state, _shuffled_datasets()).state
    for _ in range(3):  # The same round again: history on the worker.
      process.next(state, _shuffled_datasets())
    again = process.next(state, _shuffled_datasets()).state

    for a, b in zip(
        process.get_model_weights(first).trainable,
        process.get_model_weights(again).trainable,
    ):
      np.testing.assert_array_equal(a, b)
