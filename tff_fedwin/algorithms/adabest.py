"""AdaBest (Varno et al. 2022): adaptive bias estimation, one module of math.

"AdaBest: Minimizing Client Drift in Federated Learning via Adaptive Bias
Estimation" (ECCV 2022; a baseline of WiMA's Table 2). Client i keeps h_i,
its estimate of its drift, and the round t_i' it last trained in; the server
keeps the previous round's mean of the client models (theta-bar). With x =
theta^{t-1} (Algorithm 1 of the paper):

    y_i = K SGD steps on L_i(w) - <h_i, w>, from x      (gradient g - h_i)
    h_i+ = h_i / (t - t_i') + mu (x - y_i),   t_i'+ = t
    theta-bar^t = mean_i y_i
    h^t = beta (theta-bar^{t-1} - theta-bar^t)
    theta^t = theta-bar^t - h^t

theta-bar^0 = theta^0. mu = `adabest_mu` > 0 (WiMA tunes it in {0.01,
0.02}), beta = `adabest_beta` in [0, 1) ({0.5, ..., 0.95}). The decay of a
stale h_i by 1/(t - t_i') is what sets AdaBest apart from FedDyn. The first
author's code (varnio/fedsim) applies mu to the gradient and scales it by the
client's share of the data; ours is the paper's. Here a server learning rate
scales the step, theta^t = x + lr_g (theta-bar^t - h^t - x) (the paper's for
lr_g = 1); the mean is over the clients with data, a round without data
keeps x and theta-bar, and a client without data keeps h_i and t_i'.
`AdaBest` tracks rounds (`ClientStateAlgorithm.tracks_rounds`), so its
client states are `RoundClientState`s (docs/design.md sec. 4.9).
"""

import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process


class AdaBest(algorithm.ClientStateAlgorithm):
  """AdaBest's math: the client's vector is h_i, the server's theta-bar."""

  name = 'adabest'
  tracks_rounds = True

  def __init__(self, mu: float, beta: float):
    """Initializes with the paper's mu and beta.

    Raises:
      ValueError: naming `adabest_mu` or `adabest_beta` when out of range.
    """
    checks.check_number('adabest_mu', mu, positive=True)
    checks.check_number('adabest_beta', beta, minimum=0)
    if not beta < 1:
      raise ValueError(f'`adabest_beta` must be in [0, 1); got {beta!r}.')
    self._mu, self._beta = float(mu), float(beta)

  def initial_server_vector(self, trainable):
    """theta-bar^0 = theta^0."""
    return tf.nest.map_structure(tf.identity, trainable)

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform:
    """`g + (-h_i)`: the gradient of L_i(w) - <h_i, w>."""
    return step_hooks.control_variate_correction

  def step_input(self, initial_trainable, server_vector, client_vector):
    """-h_i."""
    del initial_trainable, server_vector  # Unused.
    return tf.nest.map_structure(tf.negative, client_vector)

  def new_client_vector(self, r: algorithm.ClientRound):
    """`h_i / (t - t_i') + mu (x - y)`; h_i for K = 0."""

    def new(h, d):
      return (
          h / tf.cast(r.rounds_since_last, h.dtype)
          + tf.cast(self._mu, h.dtype) * d
      )

    return tf.cond(
        r.num_steps > 0,
        lambda: tf.nest.map_structure(new, r.client_vector, r.model_delta),
        lambda: tf.nest.map_structure(tf.identity, r.client_vector),
    )

  def server_update(self, r: algorithm.ServerRound):
    """theta-bar = x + mean(dy), h = beta (old theta-bar - theta-bar),
    x + lr_g (theta-bar - h - x); theta-bar kept without data."""
    mean = tf.nest.map_structure(tf.add, r.trainable, r.mean_model_delta)
    new_trainable = tf.nest.map_structure(
        lambda x, new, old: x
        + tf.cast(r.server_learning_rate, x.dtype)
        * (new - tf.cast(self._beta, x.dtype) * (old - new) - x),
        r.trainable,
        mean,
        r.server_vector,
    )
    return new_trainable, algorithm.with_data(
        r.client_weight_sum, mean, r.server_vector
    )


def build_adabest(
    model_fn, *, mu: float, beta: float, **process_args
) -> process.ClientStateProcess:
  """Builds AdaBest (Varno et al. 2022, Algorithm 1) for TFF.

  `client_state.build_client_state_process(model_fn, AdaBest(mu, beta),
  **process_args)`: its arguments, type signatures and errors; the clients
  start from `client_state.initial_client_state(model_fn, AdaBest(...))`
  (h_i = 0, t_i' = 0).

  Raises:
    ValueError: naming `adabest_mu` or `adabest_beta` when out of range; and
      those of `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn, AdaBest(mu, beta), **process_args
  )
