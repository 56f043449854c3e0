"""MIME (Karimireddy et al. 2021) with SGD or SGDm, one module of math.

"Breaking the centralized barrier for cross-device federated learning"
(NeurIPS 2021; arXiv:2008.03606, "Mime"; WiMA Table 2's "MIME SGD" and
"MIME SGDm"). Every local step mimics the server optimizer on i.i.d. data:
an SVRG-corrected gradient, stepped with the server's optimizer state,
which the clients do not change (Algorithm 1 of the paper, base optimizer
SGD with momentum beta; beta = 0 is SGD):

    c = mean_{i in S} grad f_i(x)           (full-batch, before training)
    d = (1 - beta) (g_i(y; b) - g_i(x; b) + c) + beta m,   y <- y - lr d
    m+ = (1 - beta) c + beta m              (the server's state update)
    x+ = x + lr_g mean_i (y_i - x)

Because m+ is known before the clients train, the server sends it and a
step is d = (1 - beta) (g(y; b) - g(x; b)) + m+: the family's
`uses_full_gradient` (the round first sums the clients' grad f_i(x); the
server vector m becomes `round_vector`, m+) and `subtracts_start_gradient`
(g(x; b) on the same batch b) hooks. No client keeps a state. The WiMA
authors' code steps with PyTorch's momentum convention (m = beta m + c,
d = g' + beta m), which is this one with lr / (1 - beta); the means are
uniform over the clients with data, as theirs. docs/design.md sec. 4.9.
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process


def mime_step_gradient(beta: float) -> step_hooks.GradientTransform:
  """`(1 - beta) (g(y; b) - g(x; b)) + m+`: MIME's local step direction.

  The client-training core gives the transform g(y; b) - g(x; b) (with
  `subtracts_start_gradient`); `step_input` is m+, the round's server
  vector (which holds (1 - beta) c + beta m, so c enters through it).
  """

  def transform(gradients, trainable, momentum):
    del trainable  # Unused.
    return tf.nest.map_structure(
        lambda g, m: tf.cast(1.0 - beta, g.dtype) * g + m, gradients, momentum
    )

  return transform


class Mime(algorithm.ClientStateAlgorithm):
  """MIME's math: the server's vector is the momentum m; no client state."""

  name = 'mime'
  keeps_client_state = False
  uses_full_gradient = True
  subtracts_start_gradient = True

  def __init__(self, beta: float):
    """Initializes with the base optimizer's momentum.

    Args:
      beta: The momentum in [0, 1); 0 is MIME with SGD (m+ = c).

    Raises:
      ValueError: naming `mime_beta`, unless in [0, 1).
    """
    checks.check_number('mime_beta', beta, minimum=0)
    if beta >= 1:
      raise ValueError(f'`mime_beta` must be in [0, 1); got {beta!r}.')
    self._beta = float(beta)

  def round_vector(self, server_vector, full_gradient):
    """m+ = (1 - beta) c + beta m, c the round's mean full gradient."""
    return tf.nest.map_structure(
        lambda m, c: tf.cast(1.0 - self._beta, c.dtype) * c
        + tf.cast(self._beta, m.dtype) * m,
        server_vector,
        full_gradient,
    )

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform:
    return mime_step_gradient(self._beta)

  def new_client_vector(self, r: algorithm.ClientRound):
    """Nothing to send: zeros (the full gradient went in the first step)."""
    return tf.nest.map_structure(tf.zeros_like, r.model_delta)

  def server_update(self, r: algorithm.ServerRound):
    """`x + lr_g mean(dy)`; m+ (set before the clients trained) kept."""
    new_trainable = algorithm.sgd_step(
        r.trainable, r.mean_model_delta, r.server_learning_rate
    )
    return new_trainable, r.server_vector


def build_mime(
    model_fn, *, beta: float, **process_args
) -> tff.learning.templates.LearningProcess:
  """Builds MIME (Karimireddy et al. 2021, Algorithm 1; SGD or SGDm) for TFF.

  `client_state.build_client_state_process(model_fn, Mime(beta),
  **process_args)`: a `tff.learning.templates.LearningProcess` (no client
  states) whose `next` first sums the clients' full-batch gradients at x,
  then trains them; its arguments and errors.

  Raises:
    ValueError: naming `mime_beta`, unless in [0, 1); with
      `client_sharpness`; and those of `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn, Mime(beta), **process_args
  )
