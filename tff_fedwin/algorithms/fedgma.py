"""FedGMA (Tenison et al. 2023): gradient masked averaging, one module of math.

"Gradient Masked Averaging for Federated Learning" (TMLR 2023;
arXiv:2201.11986; a baseline of IMA's Table 1, threshold 0.8 in IMA's
Table 5). The clients train as FedAvg's; the server scales each coordinate
of the mean update by how many clients agree on its sign, an AND-mask made
soft below the threshold tau:

    A = | mean_i sign(y_i - x) |                  (coordinate-wise, in [0, 1])
    m = 1 where A > tau, else A
    x+ = x + lr_g (m * mean_i (y_i - x))

tau = `fedgma_threshold` in [0, 1] (0 is FedAvg but where all clients'
signs cancel; the IMA authors use 0.8). The paper's text is not in this
repository: the form above is the one of the IMA authors' baseline
(`utils/aggregator.py` of their code, which compares |sum_i sign| > tau n)
and of declearn's `GradientMaskedAveraging` (strict > too), with the soft
mask of the latter; the IMA authors' code subtracts 1e-4 / n times one
client's hard-masked difference from FedAvg's mean, so its FedGMA trains
FedAvg's models to about four digits (docs/design.md sec. 4.9).
Both means are uniform over the round's clients with data (the family's
rule). No client keeps a state; the server's vector is the last round's
mask m (kept for inspection; the clients step with plain gradients).
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process


@tf.function
def agreement_mask(sign_sum, count, threshold: float):
  """m = 1 where A > tau, else A, with A = |sign_sum / count| (TF).

  Args:
    sign_sum: sum_i sign(y_i - x), one tensor.
    count: The number of clients summed (0 gives A = 0).
    threshold: tau in [0, 1].
  """
  agreement = tf.abs(
      tf.math.divide_no_nan(sign_sum, tf.cast(count, sign_sum.dtype))
  )
  return tf.where(
      agreement > tf.cast(threshold, agreement.dtype),
      tf.ones_like(agreement),
      agreement,
  )


class FedGma(algorithm.ClientStateAlgorithm):
  """FedGMA's math: clients send sign(y - x); the server masks the mean."""

  name = 'fedgma'
  keeps_client_state = False

  def __init__(self, threshold: float):
    """Initializes with the mask's threshold.

    Args:
      threshold: tau in [0, 1], above which an agreement counts as 1.

    Raises:
      ValueError: naming `fedgma_threshold`, unless in [0, 1].
    """
    self._threshold = checks.check_number(
        'fedgma_threshold', threshold, minimum=0, maximum=1
    )

  def new_client_vector(self, r: algorithm.ClientRound):
    """What the client sends: sign(y - x) (`model_delta` is x - y; zeros
    without data)."""
    return tf.nest.map_structure(lambda d: -tf.sign(d), r.model_delta)

  def server_update(self, r: algorithm.ServerRound):
    """`x + lr_g m * mean(dy)`; the new mask m kept (the old without data)."""
    mask = tf.nest.map_structure(
        lambda s: agreement_mask(s, r.client_weight_sum, self._threshold),
        r.vector_delta_sum,
    )
    masked = tf.nest.map_structure(tf.multiply, mask, r.mean_model_delta)
    return (
        algorithm.sgd_step(r.trainable, masked, r.server_learning_rate),
        algorithm.with_data(r.client_weight_sum, mask, r.server_vector),
    )


def build_fedgma(
    model_fn, *, threshold: float, **process_args
) -> tff.learning.templates.LearningProcess:
  """Builds FedGMA (Tenison et al. 2023; soft AND-mask) for TFF.

  `client_state.build_client_state_process(model_fn, FedGma(threshold),
  **process_args)`: a `tff.learning.templates.LearningProcess` (no client
  states), its arguments and errors.

  Raises:
    ValueError: naming `fedgma_threshold`, unless in [0, 1]; and those of
      `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn, FedGma(threshold), **process_args
  )
