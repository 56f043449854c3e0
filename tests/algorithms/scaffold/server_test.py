"""Tests for the SCAFFOLD server step, against hand-computed values."""

import tensorflow as tf
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import scaffold


class TestScaffoldServerUpdateExecution:

  def test_server_update_without_client_data_keeps_model(self):
    weights = tff.learning.models.ModelWeights(
        trainable=[tf.constant([1.0, 2.0])], non_trainable=[tf.constant(3.0)]
    )

    new_weights, new_control = scaffold.scaffold_server_update(
        weights,
        [tf.constant([0.5, 0.5])],
        weighted_model_delta_sum=[tf.constant([0.0, 0.0])],
        weighted_non_trainable_sum=[tf.constant(0.0)],
        control_variate_delta_sum=[tf.constant([0.4, -0.8])],
        client_weight_sum=tf.constant(0.0),
        server_learning_rate=1.0,
        total_clients=4,
    )

    sref.assert_close(new_weights.trainable, [[1.0, 2.0]])
    sref.assert_close(new_weights.non_trainable, [3.0])
    sref.assert_close(new_control, [[0.6, 0.3]])

  def test_server_update_averages_with_client_weights(self):
    weights = tff.learning.models.ModelWeights(
        trainable=[tf.constant([1.0, 2.0])], non_trainable=[tf.constant(3.0)]
    )

    new_weights, new_control = scaffold.scaffold_server_update(
        weights,
        [tf.constant([0.5, 0.5])],
        # Sum of two clients' deltas.
        weighted_model_delta_sum=[tf.constant([0.2, 0.4])],
        # Sum of two clients' non-trainable values.
        weighted_non_trainable_sum=[tf.constant(9.0)],
        control_variate_delta_sum=[tf.constant([0.4, -0.8])],
        client_weight_sum=tf.constant(2.0),
        server_learning_rate=0.5,
        total_clients=4,
    )

    sref.assert_close(new_weights.trainable, [[1.05, 2.1]])
    sref.assert_close(new_weights.non_trainable, [4.5])
    sref.assert_close(new_control, [[0.6, 0.3]])
