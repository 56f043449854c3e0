"""FedACG (Kim et al. 2024): accelerated client gradient, one module of math.

"Communication-Efficient Federated Learning with Accelerated Client
Gradient" (CVPR 2024; a baseline of WiMA's Table 2). The server keeps a
momentum m and sends the clients the lookahead x + lambda m; each client
trains from it with a proximal term towards it (Algorithm 1 of the paper):

    s = x + lambda m
    y_i = K SGD steps on L_i(w) + (beta/2)||w - s||^2, from s
    m+ = lambda m + mean_i (y_i - s)
    x+ = x + m+             (= mean_i y_i)

lambda = `lambda_acg` in [0, 1) (WiMA tunes it in {0.8, 0.85, 0.9}), beta
= `beta_acg` >= 0 ({0.01, 0.001}). The authors' code
(`clients/base_client.py`) puts weight beta on ||w - s||^2 without the 1/2,
so its beta is half the paper's. Here a server learning rate scales the
step, x+ = x + lr_g m+ (the paper's for lr_g = 1), the mean is over the
clients with data, and a round without data keeps x and m. No client keeps
a state: `FedACG` is a `ClientStateAlgorithm` with `keeps_client_state`
False and `client_start` the lookahead (docs/design.md sec. 4.9).
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process


class FedACG(algorithm.ClientStateAlgorithm):
  """FedACG's math: the server's vector is the momentum m."""

  name = 'fedacg'
  keeps_client_state = False

  def __init__(self, lookahead: float, proximal_strength: float):
    """Initializes with the paper's lambda and beta.

    Args:
      lookahead: lambda in [0, 1), the momentum and lookahead weight.
      proximal_strength: beta >= 0, the weight of (beta/2)||w - s||^2.

    Raises:
      ValueError: naming `fedacg_lambda` or `fedacg_beta` when out of range.
    """
    checks.check_number('fedacg_lambda', lookahead, minimum=0)
    if not lookahead < 1:
      raise ValueError(f'`fedacg_lambda` must be in [0, 1); got {lookahead!r}.')
    checks.check_number('fedacg_beta', proximal_strength, minimum=0)
    self._lookahead = float(lookahead)
    self._proximal_strength = float(proximal_strength)

  def client_start(self, trainable, server_vector):
    """The lookahead s = x + lambda m."""
    return tf.nest.map_structure(
        lambda x, m: x + tf.cast(self._lookahead, x.dtype) * m,
        trainable,
        server_vector,
    )

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform:
    """`g + beta (w - s)` (FedProx's term towards s)."""
    return step_hooks.proximal_gradient(self._proximal_strength)

  def step_input(self, initial_trainable, server_vector, client_vector):
    """s, the weights the client started from."""
    del server_vector, client_vector  # Unused.
    return initial_trainable

  def new_client_vector(self, r: algorithm.ClientRound):
    """Nothing of its own: zeros (the server reads the model deltas)."""
    return tf.nest.map_structure(tf.zeros_like, r.server_vector)

  def server_update(self, r: algorithm.ServerRound):
    """`m+ = lambda m + mean(y_i - s)`, `x + lr_g m+` (kept without data)."""
    new_vector = algorithm.with_data(
        r.client_weight_sum,
        tf.nest.map_structure(
            lambda m, d: tf.cast(self._lookahead, m.dtype) * m + d,
            r.server_vector,
            r.mean_model_delta,
        ),
        r.server_vector,
    )
    new_trainable = algorithm.sgd_step(
        r.trainable, new_vector, r.server_learning_rate
    )
    return new_trainable, new_vector


def build_fedacg(
    model_fn, *, lookahead: float, proximal_strength: float, **process_args
) -> tff.learning.templates.LearningProcess:
  """Builds FedACG (Kim et al. 2024, Algorithm 1) for TFF.

  `client_state.build_client_state_process(model_fn, FedACG(lookahead,
  proximal_strength), **process_args)`: a
  `tff.learning.templates.LearningProcess` (no client states), its arguments
  and errors.

  Raises:
    ValueError: naming `fedacg_lambda` or `fedacg_beta` when out of range;
      and those of `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn, FedACG(lookahead, proximal_strength), **process_args
  )
