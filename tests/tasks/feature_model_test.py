"""`FeatureModel.forward_pass_with_features` against numpy.

One pass must give what TFF's Keras `forward_pass` gives (loss, predictions,
rows, every metric updated) and phi(x) beside it: numpy below computes the
two-layer network's features, logits and mean cross-entropy by hand.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.tasks import feature_model

W1 = np.array([[1.0, -1.0], [0.5, 2.0]], np.float32)
B1 = np.array([0.0, 0.5], np.float32)
W2 = np.array([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]], np.float32)
B2 = np.array([0.1, 0.0, -0.1], np.float32)
X = np.array([[1.0, 2.0], [-1.0, 1.0], [0.5, -2.0]], np.float32)
Y = np.array([2, 1, 0], np.int32)
SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, 2], tf.float32), y=tf.TensorSpec([None], tf.int32)
)


def _model(**loss):
  const = tf.keras.initializers.Constant
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.InputLayer(input_shape=(2,)),
          tf.keras.layers.Dense(
              2,
              'relu',
              kernel_initializer=const(W1),
              bias_initializer=const(B1),
          ),
          tf.keras.layers.Dense(
              3, kernel_initializer=const(W2), bias_initializer=const(B2)
          ),
      ]
  )
  return feature_model.FeatureModel(
      keras_model,
      input_spec=SPEC,
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
      **loss,
  )


def test_one_pass_gives_the_forward_pass_and_the_features():
  model = _model(
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  )
  output, features = tf.function(model.forward_pass_with_features)(
      collections.OrderedDict(x=X, y=Y)
  )
  phi = np.maximum(X @ W1 + B1, 0.0)
  logits = phi @ W2 + B2
  log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  loss = -log_probs[np.arange(3), Y].mean()
  np.testing.assert_allclose(features, phi, rtol=1e-6)
  np.testing.assert_allclose(output.predictions, logits, rtol=1e-6)
  np.testing.assert_allclose(output.loss, loss, rtol=1e-6)
  assert int(output.num_examples) == 3
  metrics = model.report_local_unfinalized_metrics()
  # The loss metric holds (sum of batch loss x rows, rows). phi is [[2, 3.5],
  # [0, 3.5], [0, 0]], the logits [[9.1, 3.5, -2.1], [7.1, 3.5, -0.1],
  # [0.1, 0, -0.1]]: argmax [0, 0, 0] against labels [2, 1, 0], one right.
  np.testing.assert_allclose(metrics['loss'], [3 * loss, 3.0], rtol=1e-6)
  np.testing.assert_allclose(metrics['accuracy'], [1.0, 3.0])
  assert int(metrics['num_examples'][0]) == 3
  assert int(metrics['num_batches'][0]) == 1


@pytest.mark.parametrize('loss', [{}, {'loss': ['a', 'b']}])
def test_needs_one_loss_function(loss):
  with pytest.raises(ValueError, match='needs one loss function'):
    _model(**loss)
