"""`FeatureModel`: a Keras classifier whose features a client step can read.

A `tff.learning.models.VariableModel` gives its logits only
(`forward_pass`). Feature-level methods (FedFA's anchors, docs/design.md
sec. 4.10) also need phi(x), the output of every layer but the last, and the
last layer h (the classifier) on its own. `FeatureModel` is the
`tff.learning.models.from_keras_model` model of a `tf.keras.Sequential`,
every `VariableModel` method its, with `features`, `classify`,
`classifier_variables` and `forward_pass_with_features` (the forward pass
and phi(x) of one pass, so a step reads the features at no second pass)
added. A task offers one through `Task.feature_model_fn`.
"""

import collections.abc
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff


class FeatureModel(tff.learning.models.VariableModel):
  """A `VariableModel` split into a feature extractor phi and a classifier h.

  logits = h(phi(x)), h the last layer of a `tf.keras.Sequential`.
  """

  def __init__(self, keras_model: tf.keras.Sequential, **keras_args: Any):
    """Wraps `tff.learning.models.from_keras_model(keras_model, **keras_args)`.

    Raises:
      ValueError: If `keras_model` is not a `tf.keras.Sequential` of at least
        two layers whose last layer has trainable weights.
    """
    if not isinstance(keras_model, tf.keras.Sequential):
      raise ValueError(
          'A FeatureModel needs a tf.keras.Sequential (features = every '
          f'layer but the last); got {type(keras_model).__name__}.'
      )
    layers = keras_model.layers
    if len(layers) < 2 or not layers[-1].trainable_weights:
      raise ValueError(
          'A FeatureModel needs a feature layer before a last layer with '
          f'weights (the classifier); got {len(layers)} layer(s).'
      )
    if not callable(keras_args.get('loss')):
      raise ValueError(
          'A FeatureModel needs one loss function (`loss=`), got '
          f'{type(keras_args.get("loss")).__name__}.'
      )
    self._layers = layers
    self._keras_model = keras_model
    self._loss = keras_args['loss']
    self._model = tff.learning.models.from_keras_model(
        keras_model, **keras_args
    )

  def features(self, x: Any, training: bool = True) -> tf.Tensor:
    """phi(x): every layer but the last on the batch's inputs `x`."""
    for layer in self._layers[:-1]:
      x = layer(x, training=training)
    return x

  def classify(self, features: tf.Tensor) -> tf.Tensor:
    """h(features): the logits of the last layer."""
    return self._layers[-1](features)

  def forward_pass_with_features(
      self, batch_input: Any, training: bool = True
  ) -> tuple[tff.learning.models.BatchOutput, tf.Tensor]:
    """`(forward_pass(batch_input), phi(x))` of one pass through the layers.

    What TFF's Keras `forward_pass` does (the loss plus the layers' own
    losses, every metric updated on the logits, the batch's rows), with the
    features h reads kept: the loss's gradient and phi(x) come from the
    same pass (with dropout, the same mask).
    """
    if isinstance(batch_input, collections.abc.Mapping):
      x, y = batch_input['x'], batch_input.get('y')
    else:
      x, y = batch_input[0], batch_input[1]
    features = self.features(x, training=training)
    predictions = self.classify(features)
    loss = tf.add_n(
        [self._loss(y_true=y, y_pred=predictions)] + self._keras_model.losses
    )
    for metric in self._model.get_metrics():
      metric.update_state(y_true=y, y_pred=predictions)
    output = tff.learning.models.BatchOutput(
        loss=loss, predictions=predictions, num_examples=tf.shape(x)[0]
    )
    return output, features

  @property
  def classifier_variables(self) -> list[tf.Variable]:
    """The last layer's trainable variables (kernel, bias)."""
    return list(self._layers[-1].trainable_variables)

  @property
  def trainable_variables(self):
    return self._model.trainable_variables

  @property
  def non_trainable_variables(self):
    return self._model.non_trainable_variables

  @property
  def local_variables(self):
    return self._model.local_variables

  @property
  def input_spec(self):
    return self._model.input_spec

  def forward_pass(self, batch_input, training=True):
    return self._model.forward_pass(batch_input, training=training)

  def predict_on_batch(self, x, training=True):
    return self._model.predict_on_batch(x, training=training)

  def report_local_unfinalized_metrics(self):
    return self._model.report_local_unfinalized_metrics()

  def metric_finalizers(self):
    return self._model.metric_finalizers()

  def reset_metrics(self):
    return self._model.reset_metrics()
