"""Gradients at other weights than the model's: SAM's, MIME's, full-batch.

Two client steps take a second batch gradient at other weights and then
restore the model (`gradient_at_weights`): SAM's at w + e
(`sharpness.perturbed_gradient`) and MIME's at the client's start weights x,
g(y; b) - g(x; b) (`client_training`'s `subtract_start_gradient`).
`full_gradient` is MIME's full-batch gradient of a client at x
(docs/design.md sec. 4.9).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf


class GradientSum(NamedTuple):
  """One client's full-batch gradient, weighted for the round's sum.

  Attributes:
    weighted_gradient: w_i * grad f_i(x), the structure of x.
    client_weight: w_i, float32: 1 for a client with data, else 0.
  """

  weighted_gradient: Any
  client_weight: Any


def gradient_at_weights(
    model: Any,
    trainable: Any,
    weights: Any,
    gradient_at: Callable[[], tuple[Any, Any]],
) -> Any:
  """The batch gradient at `weights`, with the model restored after.

  Sets the trainable variables to `weights`, calls `gradient_at()` and
  restores the trainable variables and the model's metrics
  (`model.local_variables`), so the batch counts once, at the current
  weights. Call in the `tf.function` of a client step.

  Args:
    model: The client's `tff.learning.models.VariableModel`.
    trainable: Its trainable variables (a structure).
    weights: The values to take the gradient at, `trainable`'s structure.
    gradient_at: The batch's `(output, gradients)` at the current weights.

  Returns:
    The gradient at `weights`, of `trainable`'s structure.
  """
  variables = tf.nest.flatten(trainable)
  current = [v.read_value() for v in variables]
  metrics = [v.read_value() for v in model.local_variables]
  for variable, value in zip(variables, tf.nest.flatten(weights)):
    variable.assign(value)
  _, gradients = gradient_at()
  restored = zip(variables + list(model.local_variables), current + metrics)
  for variable, value in restored:
    variable.assign(value)
  return gradients


def full_gradient(
    batch_gradient: Callable[[Any], tuple[Any, tf.Tensor]],
    trainable: Any,
    dataset: tf.data.Dataset,
) -> GradientSum:
  """grad f_i(x): the example-weighted mean of the batch gradients.

  `sum_b n_b g_b / sum_b n_b` over one pass of `dataset`, g_b the batch's
  mean-loss gradient at the model's weights and n_b its size: the gradient
  of the client's mean loss over all its examples (MIME's full-batch
  gradient). Call in a `tf.function`.

  Args:
    batch_gradient: `batch -> (gradients, batch size)` at the model's weights.
    trainable: The model's trainable variables (the structure of x).
    dataset: The client's batches.

  Returns:
    A `GradientSum`: zeros and weight 0 for an empty dataset.
  """
  total = tf.nest.map_structure(tf.zeros_like, trainable)
  count = tf.constant(0.0, tf.float32)
  for batch in iter(dataset):
    gradients, size = batch_gradient(batch)
    size = tf.cast(size, tf.float32)
    total = tf.nest.map_structure(
        lambda t, g: t + tf.cast(size, g.dtype) * g, total, gradients
    )
    count += size
  weight = tf.cast(count > 0, tf.float32)
  return GradientSum(
      tf.nest.map_structure(
          lambda t: t / tf.cast(tf.maximum(count, 1.0), t.dtype), total
      ),
      weight,
  )
