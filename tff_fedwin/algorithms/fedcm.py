"""FedCM (Xu et al. 2021): client-level momentum, one module of math.

"FedCM: Federated Learning with Client-level Momentum" (arXiv:2106.10874; a
baseline of WiMA's Table 2). The server sends the clients, with the model x,
Delta, its estimate of the global gradient; every local step mixes the
client's gradient with it (Algorithm 1 of the paper):

    v = alpha g(y) + (1 - alpha) Delta,   y <- y - lr v
    Delta+ = mean_i (x - y_i) / (lr K)    (the round's mean local gradient)
    x+ = x + lr_g mean_i (y_i - x)

alpha = `alpha_cm` in (0, 1] (1 is FedAvg; WiMA tunes it in {0.05, 0.1,
0.5}). The paper's clients all take K steps; here each client divides its
own update by its own lr K_i (the two agree for equal K), and the means are
over the clients with data (a round without data keeps x and Delta). No
client keeps a state: `FedCM` is a `ClientStateAlgorithm` with
`keeps_client_state` False, so the process is a `LearningProcess` on the
family's shared machinery (docs/design.md sec. 4.9).
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process


def momentum_mix_gradient(
    alpha: float,
) -> step_hooks.GradientTransform:
  """`alpha g + (1 - alpha) Delta`: FedCM's local step direction (Alg. 1).

  `step_input` is Delta, the server's global-gradient estimate.
  """

  def transform(gradients, trainable, delta):
    del trainable  # Unused.
    return tf.nest.map_structure(
        lambda g, d: tf.cast(alpha, g.dtype) * g
        + tf.cast(1.0 - alpha, g.dtype) * d,
        gradients,
        delta,
    )

  return transform


class FedCM(algorithm.ClientStateAlgorithm):
  """FedCM's math: the server's vector is Delta; clients keep no state."""

  name = 'fedcm'
  keeps_client_state = False

  def __init__(self, alpha: float):
    """Initializes with the momentum weight.

    Args:
      alpha: alpha_CM in (0, 1], the weight of the client's own gradient.

    Raises:
      ValueError: naming `fedcm_alpha`, unless in (0, 1].
    """
    self._alpha = checks.check_number(
        'fedcm_alpha', alpha, positive=True, maximum=1
    )

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform:
    return momentum_mix_gradient(self._alpha)

  def new_client_vector(self, r: algorithm.ClientRound):
    """What the client sends: (x - y) / (lr K), zeros for K = 0."""
    scale = tf.maximum(tf.cast(r.num_steps, tf.float32), 1.0) * r.learning_rate
    return tf.nest.map_structure(
        lambda d: d / tf.cast(scale, d.dtype), r.model_delta
    )

  def server_update(self, r: algorithm.ServerRound):
    """`x + lr_g mean(dy)`; Delta the mean of the sent vectors (kept
    without data)."""
    new_trainable = algorithm.sgd_step(
        r.trainable, r.mean_model_delta, r.server_learning_rate
    )
    mean = tf.nest.map_structure(
        lambda total: total / tf.cast(r.client_weight_sum, total.dtype),
        r.vector_delta_sum,
    )
    return new_trainable, algorithm.with_data(
        r.client_weight_sum, mean, r.server_vector
    )


def build_fedcm(
    model_fn, *, alpha: float, **process_args
) -> tff.learning.templates.LearningProcess:
  """Builds FedCM (Xu et al. 2021, Algorithm 1) for TFF.

  `client_state.build_client_state_process(model_fn, FedCM(alpha),
  **process_args)`: a `tff.learning.templates.LearningProcess` (no client
  states), its arguments and errors.

  Raises:
    ValueError: naming `fedcm_alpha`, unless in (0, 1]; and those of
      `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn, FedCM(alpha), **process_args
  )
