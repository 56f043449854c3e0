"""`FeatureStep`: a client step that reads the model's features (FedFA's).

`client_training.build_client_training(feature_step=)` takes one. The model
must have features phi(x) and the classifier h apart (`HasFeatures`, e.g.
`tff_fedwin.tasks.feature_model.FeatureModel`). Each batch's training loss
then gains `feature_step.loss` of the batch's features (from the loss's own
forward pass), and after the optimizer step `feature_step.after_step` runs
on the features taken before it (it may also move weights, e.g. a step of
its own on the classifier). The feature state
rides in the loop's `ClientStepState.feature_state` and comes out in
`ClientOutput.feature_state`. docs/design.md sec. 4.10.
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import tensorflow as tf


@runtime_checkable
class HasFeatures(Protocol):
  """A `tff.learning.models.VariableModel` whose logits are h(phi(x))."""

  def features(self, x: Any, training: bool = True) -> tf.Tensor:
    """phi(x), the feature extractor's output."""

  def classify(self, features: tf.Tensor) -> tf.Tensor:
    """h(features), the logits."""

  @property
  def classifier_variables(self) -> list[tf.Variable]:
    """h's trainable variables."""

  def forward_pass_with_features(
      self, batch_input: Any, training: bool = True
  ) -> tuple[Any, tf.Tensor]:
    """`(forward_pass(batch_input), phi(x))` of one pass."""


class FeatureStep(NamedTuple):
  """How a client step uses the features (all TF, traced in the step).

  Attributes:
    initial_state: `(server_vector, round_num, model) -> state`, before the
      client's loop: what `loss` and `after_step` read and update; round_num
      the rounds completed (int64).
    loss: `(features, labels, state) -> float32 scalar`, added to the batch's
      training loss (its gradient reaches the feature extractor).
    after_step: `(state, model, features, labels) -> state`, after the
      optimizer step, with the batch's features before it.
    sent_vector: `(state, server_vector, num_examples) -> vector`, after the
      loop: the vector the client sends (summed over the round's clients).
  """

  initial_state: Callable[[Any, Any, Any], Any]
  loss: Callable[[Any, Any, Any], Any]
  after_step: Callable[[Any, Any, Any, Any], Any]
  sent_vector: Callable[[Any, Any, Any], Any]


def feature_loss_fn(model, feature_step, state, labels):
  """`batch -> (output, features, term)`: the model's forward pass and phi(x)
  of one pass (`model.forward_pass_with_features`; phi(x) flattened to
  [batch, d]) and `feature_step.loss` of them, for the client step's tape."""

  def feature_loss(batch):
    output, features = model.forward_pass_with_features(batch, training=True)
    features = tf.reshape(features, [tf.shape(features)[0], -1])
    return output, features, feature_step.loss(features, labels, state)

  return feature_loss
