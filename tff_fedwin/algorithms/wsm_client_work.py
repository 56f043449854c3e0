"""Model-delta client work training with the WSM loss (docs/design.md sec. 2).

`build_wsm_client_work` is `tff_fedwin.algorithms.client_work.build_client_work`
with `client_loss='wsm'`: a drop-in for TFF's `build_model_delta_client_work`
that composes with `compose_learning_process`, the window finalizer and
`build_scheduled_client_work`.
"""

from collections.abc import Callable
from typing import Any, Optional

import tensorflow_federated as tff

from tff_fedwin.algorithms import client_work
from tff_fedwin.losses import labels as labels_lib

ModelFn = Callable[[], tff.learning.models.VariableModel]


def build_wsm_client_work(
    model_fn: ModelFn,
    optimizer: tff.learning.optimizers.Optimizer,
    *,
    num_classes: int,
    client_weighting: tff.learning.ClientWeighting = (
        tff.learning.ClientWeighting.NUM_EXAMPLES
    ),
    metrics_aggregator: Optional[Any] = None,
    label_key: str = labels_lib.DEFAULT_LABEL_KEY,
    proximal_strength: float = 0.0,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds a model-delta `ClientWorkProcess` training with the WSM loss.

  Per client and round: beta_c = n_c / n over the client's dataset (one pass),
  then one `optimizer` step per batch b on

    L_b(w) = 1/|b| sum_{(x, y) in b} -log(beta_y e^{z_y} / sum_c beta_c e^{z_c})
             + (mu / 2) ||w - w_global||^2,

  z = f_w(x) the logits, mu = `proximal_strength` (WSM paper Eq. 4 up to a
  per-example constant, see `tff_fedwin.losses.wsm_cross_entropy`; FedProx Eq.
  2 on the trainable weights). The update is `w_global - w` on the trainable
  weights; classes with beta_c = 0 are masked out of the softmax (no NaN). The
  model's own loss (with any Keras regularization) only enters the reported
  metrics.

  Type signatures and client weights: as `client_work.build_client_work`,
  identical to those of `tff.learning.templates.build_model_delta_client_work`
  for the same model and optimizer. Setting `learning_rate` in the state (as
  `build_scheduled_client_work` does) sets the client learning rate.

  Args:
    model_fn: No-arg callable returning a new
      `tff.learning.models.VariableModel` whose predictions are logits
      [batch, num_classes], with integer labels of shape [batch] or [batch, 1]
      under `label_key` (mapping batches) or at index 1 (tuple batches).
    optimizer: The client `tff.learning.optimizers.Optimizer`.
    num_classes: The number of classes C >= 1 (the logits' last dimension).
    client_weighting: A `tff.learning.ClientWeighting`.
    metrics_aggregator: As in `build_model_delta_client_work`; default
      `tff.learning.metrics.sum_then_finalize`.
    label_key: The labels' key in mapping batches.
    proximal_strength: The FedProx coefficient mu >= 0; 0 disables the term.

  Returns:
    A `tff.learning.templates.ClientWorkProcess`.

  Raises:
    TypeError: If `client_weighting` is not a `tff.learning.ClientWeighting`,
      or the labels are not integers.
    ValueError: If `num_classes` < 1 or `proximal_strength` < 0.
    KeyError: If mapping batches have no `label_key`.

  At run time, a label outside [0, num_classes) fails the computation with
  the WSM error ("WSM labels are out of range ... num_classes = C").
  """
  return client_work.build_client_work(
      model_fn,
      optimizer,
      client_loss='wsm',
      num_classes=num_classes,
      proximal_strength=proximal_strength,
      client_weighting=client_weighting,
      metrics_aggregator=metrics_aggregator,
      label_key=label_key,
  )
