"""One local step of a client: the batch's gradient, corrections, the update.

`build_client_step` returns `client_step(step_state, batch)`, the middle of
`client_training`'s init, step, final: the batch loss's gradient (with
FedFA's feature term), at SAM/ASAM's ascent, minus MIME's start gradient,
plus weight decay, through the gradient transform, then one optimizer step.
`batch_gradient` is the uncorrected gradient (MIME's full-batch gradient).
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tff_fedwin.algorithms import feature_steps
from tff_fedwin.algorithms import gradient_transforms
from tff_fedwin.algorithms import reference_gradient
from tff_fedwin.algorithms import sharpness as sharpness_lib
from tff_fedwin.losses import labels as labels_lib
from tff_fedwin.losses import wsm


def batch_size(output: Any) -> tf.Tensor:
  """`output.num_examples`, else the predictions' batch dimension (int64)."""
  if output.num_examples is None:
    return tf.shape(output.predictions, out_type=tf.int64)[0]
  return tf.cast(output.num_examples, tf.int64)


def batch_loss_fn(client_loss: str, label_key: str) -> Callable[..., Any]:
  """`(output, batch, class_proportions) -> loss`: the training batch loss."""

  def model_loss(output, batch, class_proportions):
    del batch, class_proportions  # Unused.
    return output.loss

  def wsm_loss(output, batch, class_proportions):
    return tf.reduce_mean(
        wsm.wsm_cross_entropy(
            labels_lib.batch_labels(batch, label_key),
            output.predictions,
            class_proportions,
        )
    )

  return wsm_loss if client_loss == 'wsm' else model_loss


def batch_gradient(
    model, trainable, batch_loss, batch, class_proportions, feature_loss=None
):
  """`(output, gradients, features)` of the batch loss (plus `feature_loss`'s
  term: `batch -> (output, features, term)`, the forward pass with it;
  `features` `()` without) at the model's weights; a gradient the tape does
  not produce is 0."""
  features = ()
  with tf.GradientTape() as tape:
    if feature_loss is None:
      output = model.forward_pass(batch, training=True)
    else:
      output, features, term = feature_loss(batch)
    loss = batch_loss(output, batch, class_proportions)
    if feature_loss is not None:
      loss += tf.cast(term, loss.dtype)
  gradients = tape.gradient(loss, trainable)
  gradients = tf.nest.map_structure(
      lambda g, v: tf.zeros_like(v) if g is None else g, gradients, trainable
  )
  return output, gradients, features


def build_client_step(
    model,
    trainable,
    optimizer_step,
    *,
    batch_loss,
    gradient_transform,
    weight_decay,
    sharpness,
    subtract_start_gradient,
    feature_step,
    label_key,
):
  """`client_step`: one optimizer step on the batch's (transformed) gradient."""

  @tf.function
  def client_step(step_state, batch):
    proportions = step_state.class_proportions

    def gradient_at():
      output, gradients, _ = batch_gradient(
          model, trainable, batch_loss, batch, proportions
      )
      return output, gradients

    feature_loss = labels = None
    if feature_step is not None:
      labels = labels_lib.batch_labels(batch, label_key)
      feature_loss = feature_steps.feature_loss_fn(
          model, feature_step, step_state.feature_state, labels
      )
    output, gradients, features = batch_gradient(
        model, trainable, batch_loss, batch, proportions, feature_loss
    )
    if sharpness is not None:
      gradients = sharpness_lib.perturbed_gradient(
          sharpness, model, trainable, gradients, gradient_at
      )
    if subtract_start_gradient:
      start = tf.nest.pack_sequence_as(trainable, step_state.start_trainable)
      at_start = reference_gradient.gradient_at_weights(
          model, trainable, start, gradient_at
      )
      gradients = tf.nest.map_structure(tf.subtract, gradients, at_start)
    gradients = gradient_transforms.weight_decay_gradient(
        gradients, trainable, weight_decay
    )
    if gradient_transform is not None:
      step_input = tf.nest.pack_sequence_as(trainable, step_state.step_input)
      gradients = gradient_transform(gradients, trainable, step_input)
    optimizer_state, new_trainable = optimizer_step.next(
        step_state.optimizer_state,
        tuple(tf.nest.flatten(trainable)),
        tuple(tf.nest.flatten(gradients)),
    )
    for variable, value in zip(tf.nest.flatten(trainable), new_trainable):
      variable.assign(value)
    feature_state = step_state.feature_state
    if feature_step is not None:
      feature_state = feature_step.after_step(
          feature_state, model, features, labels
      )
    examples = batch_size(output)
    loss_sum = step_state.loss_sum
    if output.loss is not None:
      loss_sum += tf.cast(output.loss, tf.float32) * tf.cast(
          examples, tf.float32
      )
    return step_state._replace(
        optimizer_state=optimizer_state,
        num_examples=step_state.num_examples + examples,
        num_steps=step_state.num_steps + 1,
        loss_sum=loss_sum,
        feature_state=feature_state,
    )

  return client_step
