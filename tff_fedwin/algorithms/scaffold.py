"""SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II): its math.

"SCAFFOLD: Stochastic Controlled Averaging for Federated Learning" (ICML
2020). Each client keeps a control variate c_i, the server one c; the client
corrects its gradient by c - c_i, so its local steps follow the global
direction (docs/design.md sec. 3):

    y <- y - lr (g(y) + c - c_i)                        (Alg. 1, line 10)
    c_i+ = c_i - c + (x - y) / (K lr)                   (line 12, option II)
    x <- x + lr_g sum_i(dy_i) / |S|,  c <- c + sum_i(dc_i) / N   (lines 16-17)

`Scaffold` is that math as a `ClientStateAlgorithm`; the process, the
window, the stores and the state transfer are the shared ones of
`tff_fedwin.algorithms.client_state`.
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import client
from tff_fedwin.algorithms.client_state import process
from tff_fedwin.algorithms.client_state import types

# The family's names under SCAFFOLD's, as before the plug-in.
ScaffoldServerState = types.ServerState
ScaffoldClientState = types.ClientState
ScaffoldProcess = process.ClientStateProcess
initial_client_state = client.initial_client_state
model_weights_to_evaluate = process.model_weights_to_evaluate


@tf.function
def option_ii_control_variate(
    client_control_variate: Any,
    server_control_variate: Any,
    model_delta: Any,
    num_steps: tf.Tensor,
    learning_rate: float,
) -> Any:
  """`c_i+ = c_i - c + (x - y) / (K lr)` (Karimireddy et al., Alg. 1 l. 12, II).

  Args:
    client_control_variate: c_i.
    server_control_variate: c, same structure.
    model_delta: x - y, same structure.
    num_steps: K, int64; for K = 0 the result is c_i.
    learning_rate: The client learning rate lr.

  Returns:
    c_i+, same structure as c_i.
  """

  def new_control_variate(c_i, c, delta):
    scale = tf.cast(num_steps, delta.dtype) * tf.cast(
        learning_rate, delta.dtype
    )
    return c_i - c + delta / scale

  # A branch, not a `tf.where` over the tensors (one pass less over every
  # leaf; the same values).
  return tf.cond(
      num_steps > 0,
      lambda: tf.nest.map_structure(
          new_control_variate,
          client_control_variate,
          server_control_variate,
          model_delta,
      ),
      lambda: tf.nest.map_structure(tf.identity, client_control_variate),
  )


class Scaffold(algorithm.ClientStateAlgorithm):
  """SCAFFOLD's math (option II), a `ClientStateAlgorithm` without
  hyperparameters of its own (lr and lr_g are the process's)."""

  name = 'scaffold'

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform:
    """`g + (c - c_i)` (Alg. 1, line 10)."""
    return step_hooks.control_variate_correction

  def step_input(self, initial_trainable, server_vector, client_vector):
    """The correction c - c_i."""
    del initial_trainable  # Unused.
    return tf.nest.map_structure(tf.subtract, server_vector, client_vector)

  def new_client_vector(self, r: algorithm.ClientRound):
    """c_i+ by option II (`option_ii_control_variate`)."""
    return option_ii_control_variate(
        r.client_vector,
        r.server_vector,
        r.model_delta,
        r.num_steps,
        r.learning_rate,
    )

  def server_update(self, r: algorithm.ServerRound):
    """`x + lr_g mean(dy)`, `c + sum_i(dc_i) / N` (Alg. 1, lines 16-17)."""
    new_trainable = algorithm.sgd_step(
        r.trainable, r.mean_model_delta, r.server_learning_rate
    )
    new_vector = tf.nest.map_structure(
        lambda c, d: c + d / tf.cast(r.total_clients, c.dtype),
        r.server_vector,
        r.vector_delta_sum,
    )
    return new_trainable, new_vector


def build_scaffold(model_fn, **process_args) -> process.ClientStateProcess:
  """Builds SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II) for TFF.

  `client_state.build_client_state_process(model_fn, Scaffold(),
  **process_args)`: its arguments, type signatures and errors. The
  clients start from `initial_client_state(model_fn)` (c_i = 0).
  """
  return process.build_client_state_process(
      model_fn, Scaffold(), **process_args
  )
