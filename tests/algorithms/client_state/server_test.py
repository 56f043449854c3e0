"""Tests for the family's server step with SCAFFOLD's and FedDyn's math,
against hand-computed values."""

import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import feddyn
from tff_fedwin.algorithms import scaffold
from tff_fedwin.algorithms.client_state import server
from tff_fedwin.algorithms.client_state import types

# x = [1, 2], non-trainable 3, server vector [0.5, 0.5], N = 4; two clients
# with data whose deltas sum to [0.2, 0.4], non-trainable values to 9, and
# vector changes to [0.4, -0.8].
# SCAFFOLD, lr_g = 0.5: x + 0.5 * [0.1, 0.2] = [1.05, 2.1];
#   c = [0.5, 0.5] + [0.4, -0.8] / 4 = [0.6, 0.3].
# FedDyn, alpha = 0.5, lr_g = 1: h = [0.6, 0.3] as c above;
#   x + ([0.1, 0.2] - [0.6, 0.3] / 0.5) = [1 + 0.1 - 1.2, 2 + 0.2 - 0.6].
# Without data (client weight 0) x and the non-trainable weight stay.
CASES = [
    ('scaffold', scaffold.Scaffold(), 0.5, [1.05, 2.1]),
    ('feddyn', feddyn.FedDyn(alpha=0.5), 1.0, [-0.1, 1.6]),
]


def _step(algorithm, lr, *, delta_sum, non_trainable_sum, weight_sum):
  weights = tff.learning.models.ModelWeights(
      trainable=[tf.constant([1.0, 2.0])], non_trainable=[tf.constant(3.0)]
  )
  sums = types.RoundSums(
      weighted_model_delta=[tf.constant(delta_sum)],
      weighted_non_trainable_weights=[tf.constant(non_trainable_sum)],
      control_variate_delta=[tf.constant([0.4, -0.8])],
      client_weight=tf.constant(weight_sum),
      num_examples=tf.constant(0, tf.int64),
      loss_sum=tf.constant(0.0),
      num_clients_with_data=tf.constant(0),
  )
  return server.server_step(
      algorithm,
      weights,
      [tf.constant([0.5, 0.5])],
      sums,
      server_learning_rate=lr,
      total_clients=4,
  )


@pytest.mark.parametrize(
    'algorithm,lr,expected', [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
class TestServerStep:

  def test_averages_with_client_weights(self, algorithm, lr, expected):
    new_weights, new_vector = _step(
        algorithm,
        lr,
        delta_sum=[0.2, 0.4],
        non_trainable_sum=9.0,
        weight_sum=2.0,
    )

    sref.assert_close(new_weights.trainable, [expected])
    sref.assert_close(new_weights.non_trainable, [4.5])
    sref.assert_close(new_vector, [[0.6, 0.3]])

  def test_without_client_data_keeps_model(self, algorithm, lr, expected):
    del expected  # Unused: the model stays.
    new_weights, new_vector = _step(
        algorithm,
        lr,
        delta_sum=[0.0, 0.0],
        non_trainable_sum=0.0,
        weight_sum=0.0,
    )

    sref.assert_close(new_weights.trainable, [[1.0, 2.0]])
    sref.assert_close(new_weights.non_trainable, [3.0])
    sref.assert_close(new_vector, [[0.6, 0.3]])
