"""The gradient transforms of a client step: FedProx, SCAFFOLD, weight decay.

`client_training.build_client_training` takes the plain batch gradient g and
turns it into the gradient its optimizer steps with: `weight_decay_gradient`
(g + wd w) first, then one `GradientTransform`, `(g, w, step_input) -> g'`,
where `step_input` is constant over the client's loop (docs/design.md sec.
4.4): `proximal_gradient` (FedProx) or `control_variate_correction`
(SCAFFOLD).
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf

# (gradients, trainable weights, step_input) -> gradients.
GradientTransform = Callable[[Any, Any, Any], Any]


def proximal_gradient(proximal_strength: float) -> GradientTransform:
  """`g + mu (w - w_global)`: adds the gradient of (mu/2)||w - w_global||^2.

  The FedProx term (Li et al. 2020, Eq. 2); `step_input` is w_global's
  trainable weights.

  Args:
    proximal_strength: mu >= 0.

  Returns:
    A `GradientTransform`.
  """

  def transform(gradients, trainable, initial_trainable):
    return tf.nest.map_structure(
        lambda g, v, v0: g
        + tf.cast(proximal_strength, v.dtype) * (v - tf.cast(v0, v.dtype)),
        gradients,
        trainable,
        initial_trainable,
    )

  return transform


def control_variate_correction(gradients, trainable, correction):
  """`g + (c - c_i)`: SCAFFOLD's corrected gradient (Alg. 1, line 10).

  A `GradientTransform` whose `step_input` is the correction c - c_i.
  """
  del trainable  # Unused.
  return tf.nest.map_structure(tf.add, gradients, correction)


def weight_decay_gradient(gradients: Any, trainable: Any, weight_decay: float):
  """`g + wd * w`: the L2 term (wd/2)||w||^2 added to a gradient.

  As PyTorch's `torch.optim.SGD(weight_decay=wd)` applies it: to the raw
  gradient, before momentum and any correction (docs/design.md sec. 4.4).
  `weight_decay` 0 returns `gradients` unchanged (no op in the graph).
  """
  if not weight_decay:
    return gradients
  return tf.nest.map_structure(
      lambda g, v: g + tf.cast(weight_decay, v.dtype) * v, gradients, trainable
  )
