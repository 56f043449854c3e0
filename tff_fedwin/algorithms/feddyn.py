"""FedDyn (Acar et al. 2021): dynamic regularization, one module of math.

"Federated Learning Based on Dynamic Regularization" (ICLR 2021; a baseline
of WiMA's Table 2). Each client k keeps the gradient of its loss at its last
local model, s_k = grad L_k(theta_k^{t-1}) (0 before its first round); the
server keeps h. With x = theta^{t-1}, Algorithm 1 of the paper:

    theta_k^t = argmin L_k(theta) - <s_k, theta> + (alpha/2)||theta - x||^2
    s_k+ = s_k - alpha (theta_k^t - x)
    h^t = h^{t-1} - (alpha / m) sum_{k in P_t} (theta_k^t - x)
    theta^t = mean_{k in P_t} theta_k^t - h^t / alpha

m the population size, P_t the round's clients. Here the argmin is the
client's K local SGD steps on that objective, whose gradient is
g - s_k + alpha (theta - x) (`dynamic_regularizer_gradient`); the clients
with data are averaged (as SCAFFOLD's), and a server learning rate lr_g
scales the server's step: theta^t = x + lr_g (mean_k(theta_k^t - x) -
h^t / alpha), the paper's for lr_g = 1. Everything else (process, window,
stores, state transfer) is `tff_fedwin.algorithms.client_state`'s
(docs/design.md sec. 4.9).
"""

import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process


def dynamic_regularizer_gradient(
    alpha: float,
) -> step_hooks.GradientTransform:
  """`g - s_k + alpha (w - x)`: the gradient of FedDyn's local objective.

  The gradient of L_k(w) - <s_k, w> + (alpha/2)||w - x||^2 (Acar et al.
  2021, Alg. 1, the client's problem), x the received trainable weights. A
  step input has the weights' structure, so the two constants come as one:
  `step_input` is s_k + alpha x, and the transform is
  g + alpha w - step_input.
  """

  def transform(gradients, trainable, step_input):
    return tf.nest.map_structure(
        lambda g, w, b: g + tf.cast(alpha, w.dtype) * w - b,
        gradients,
        trainable,
        step_input,
    )

  return transform


class FedDyn(algorithm.ClientStateAlgorithm):
  """FedDyn's math, a `ClientStateAlgorithm`.

  The client's vector is s_k, the server's h (module docstring).
  """

  name = 'feddyn'

  def __init__(self, alpha: float):
    """Initializes with the regularization strength.

    Args:
      alpha: FedDyn's alpha > 0 (WiMA tunes it in {0.01, 0.001}).

    Raises:
      ValueError: naming `feddyn_alpha`, unless a positive number.
    """
    checks.check_number('feddyn_alpha', alpha, positive=True)
    self._alpha = float(alpha)

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform:
    return dynamic_regularizer_gradient(self._alpha)

  def step_input(self, initial_trainable, server_vector, client_vector):
    """`s_k + alpha x` (`dynamic_regularizer_gradient`)."""
    del server_vector  # Unused: h stays on the server.
    return tf.nest.map_structure(
        lambda s, x: s + tf.cast(self._alpha, x.dtype) * x,
        client_vector,
        initial_trainable,
    )

  def new_client_vector(self, r: algorithm.ClientRound):
    """`s_k+ = s_k + alpha (x - theta_k^t)`; s_k for K = 0 (x - y = 0)."""
    return tf.nest.map_structure(
        lambda s, d: s + tf.cast(self._alpha, s.dtype) * d,
        r.client_vector,
        r.model_delta,
    )

  def server_update(self, r: algorithm.ServerRound):
    """`h^t = h + sum_k(ds_k) / m`, `x + lr_g (mean(dy) - h^t / alpha)`.

    sum_k ds_k = -alpha sum_k (theta_k^t - x), so h^t is the paper's.
    """
    new_vector = tf.nest.map_structure(
        lambda h, d: h + d / tf.cast(r.total_clients, h.dtype),
        r.server_vector,
        r.vector_delta_sum,
    )
    new_trainable = tf.nest.map_structure(
        lambda x, d, h: x
        + tf.cast(r.server_learning_rate, x.dtype)
        * (d - h / tf.cast(self._alpha, x.dtype)),
        r.trainable,
        r.mean_model_delta,
        new_vector,
    )
    return new_trainable, new_vector


def build_feddyn(
    model_fn, *, alpha: float, **process_args
) -> process.ClientStateProcess:
  """Builds FedDyn (Acar et al. 2021, Algorithm 1) for TFF.

  `client_state.build_client_state_process(model_fn, FedDyn(alpha),
  **process_args)`: its arguments, type signatures and errors; the clients
  start from `client_state.initial_client_state(model_fn)` (s_k = 0).

  Raises:
    ValueError: naming `feddyn_alpha`, unless a positive number; and those of
      `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn, FedDyn(alpha), **process_args
  )
