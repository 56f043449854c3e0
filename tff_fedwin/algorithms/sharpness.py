"""Sharpness-aware client steps: SAM and ASAM (FedSAM, FedASAM).

FedSAM and FedASAM (Caldarola et al. 2022, "Improving Generalization in
Federated Learning by Seeking Flat Minima") train each client with SAM
(Foret et al. 2021) or its adaptive form ASAM (Kwon et al. 2021): every step
first moves the weights up the batch gradient g = grad L_b(w) by

    SAM:   e = rho * g / ||g||
    ASAM:  e = rho * T_w^2 g / ||T_w g||,  T_w = |w| + eta

then takes the gradient at w + e, restores w and lets the optimizer step
with that gradient. T_w is elementwise and scales the weights but not the
biases, as the authors' `minimizers.py` (`ASAM.ascent_step`: only
parameters named `weight`, which in Keras are every variable but `bias` and
batch norm's `beta`); the norm is over all trainable variables together,
plus 1e-16 (theirs). docs/design.md, "Sharpness-aware clients".
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin.algorithms import reference_gradient

SHARPNESS_KINDS = choices.SHARPNESS_KINDS
# Added to the norm (the authors' `minimizers.py`).
NORM_EPSILON = 1e-16
# Keras variable names (before ':0') that are biases: not scaled by ASAM.
_BIAS_NAMES = ('bias', 'beta')


class Sharpness(NamedTuple):
  """A client's sharpness-aware step.

  Attributes:
    kind: `'sam'` or `'asam'`.
    rho: The neighbourhood radius rho > 0.
    eta: ASAM's eta >= 0 in T_w = |w| + eta (unused by SAM).
  """

  kind: str
  rho: float
  eta: float = 0.0


def build_sharpness(kind: str, rho: float, eta: float = 0.0) -> Sharpness:
  """A checked `Sharpness`.

  Raises:
    ValueError: naming the argument, if `kind` is not one of
      `SHARPNESS_KINDS`, `rho` <= 0 or `eta` < 0.
  """
  if kind not in SHARPNESS_KINDS:
    raise ValueError(
        f'`kind` must be one of {", ".join(SHARPNESS_KINDS)}; got {kind!r}.'
    )
  checks.check_number('rho', rho, positive=True)
  checks.check_number('eta', eta, minimum=0)
  return Sharpness(kind, float(rho), float(eta))


def check_sharpness(sharpness: Any) -> None:
  """Raises TypeError unless `sharpness` is a `Sharpness` or None."""
  if sharpness is not None and not isinstance(sharpness, Sharpness):
    raise TypeError(
        '`sharpness` must be a tff_fedwin.algorithms.sharpness.Sharpness '
        f'(build_sharpness) or None, got {type(sharpness).__name__}.'
    )


def is_scaled(variable_name: str) -> bool:
  """Whether ASAM scales this trainable variable by T_w (not a bias)."""
  base = variable_name.rsplit('/', 1)[-1].split(':', 1)[0]
  return base not in _BIAS_NAMES


def perturbation(
    sharpness: Sharpness,
    gradients: Sequence[tf.Tensor],
    weights: Sequence[tf.Tensor],
    scaled: Sequence[bool],
) -> list[tf.Tensor]:
  """e, the step up the gradient before SAM's second gradient.

  `(Sharpness, [g_i], [w_i], [bool]) -> [e_i]`, one tensor per trainable
  variable: SAM's first-order ascent step, or ASAM's with T_w (module
  docstring).

  Args:
    sharpness: The `Sharpness`.
    gradients: g_i, the batch gradient of each trainable variable.
    weights: w_i, their values.
    scaled: Whether ASAM scales each (`is_scaled`); ignored by SAM.

  Returns:
    The list of e_i.
  """
  if sharpness.kind == 'sam':
    factors = [None] * len(gradients)
  else:
    factors = [
        tf.abs(w) + tf.cast(sharpness.eta, w.dtype) if s else None
        for w, s in zip(weights, scaled)
    ]
  scaled_gradients = [
      g if t is None else g * t for g, t in zip(gradients, factors)
  ]
  norm = tf.sqrt(
      tf.add_n([tf.reduce_sum(tf.square(g)) for g in scaled_gradients])
  )
  coefficient = sharpness.rho / (norm + NORM_EPSILON)
  return [
      coefficient * (g if t is None else g * t)
      for g, t in zip(scaled_gradients, factors)
  ]


def perturbed_gradient(
    sharpness: Sharpness,
    model: Any,
    trainable: Any,
    gradients: Any,
    gradient_at: Callable[[], tuple[Any, Any]],
) -> Any:
  """SAM's gradient: the batch gradient at w + e, with w restored after.

  `(Sharpness, model, trainable, g(w), gradient_at) -> g(w + e)`.

  `e = perturbation(sharpness, gradients, w, ...)` from `gradients`, the
  batch gradient at w; `gradient_at()` returns `(output, gradients)` of the
  batch at the model's current weights. Call in the `tf.function` of a
  client step. The second forward pass leaves the model's metrics
  (`model.local_variables`) as the first left them: the batch's loss and
  accuracy count once, at w, as the authors' clients report theirs.

  Args:
    sharpness: The `Sharpness`.
    model: The client's `tff.learning.models.VariableModel`.
    trainable: Its trainable variables (a structure).
    gradients: The batch gradient at w, of `trainable`'s structure.
    gradient_at: Computes the batch gradient at the current weights.

  Returns:
    The gradient at w + e, of `trainable`'s structure.
  """
  variables = tf.nest.flatten(trainable)
  weights = [v.read_value() for v in variables]
  steps = perturbation(
      sharpness,
      tf.nest.flatten(gradients),
      weights,
      [is_scaled(v.name) for v in variables],
  )
  # Restores w itself, not (w + e) - e: exact, where the authors' p.sub_(eps)
  # rounds.
  return reference_gradient.gradient_at_weights(
      model,
      trainable,
      tf.nest.pack_sequence_as(
          trainable, [w + e for w, e in zip(weights, steps)]
      ),
      gradient_at,
  )
