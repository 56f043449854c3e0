"""Stops a run whose training has stopped being finite.

A NaN or infinite loss never recovers: every later round would average NaN
models. TFF's server optimizers skip a non-finite aggregate update instead
(metric `update_non_finite` = 1), which hides the same failure: the run goes on
without learning. The round loop checks each round's metrics before it records
or checkpoints them, so the last checkpoint stays the last finite state.
"""

import math
from collections.abc import Mapping
from typing import Optional

from tff_fedwin import errors

LOSS_SUFFIX = 'loss'
NON_FINITE_UPDATE_SUFFIX = 'update_non_finite'


class TrainingDivergedError(errors.TrainingStoppedError):
  """A loss became NaN or infinite, or the server skipped a non-finite update.

  Attributes:
    round_num: The round whose metrics say so.
    metric: The metric's name, e.g. `train/client_work/train/loss`.
    value: Its value (NaN or inf for a loss, 1 for `update_non_finite`).
  """

  def __init__(self, message: str, round_num: int, metric: str, value: float):
    super().__init__(message)
    self.round_num = round_num
    self.metric = metric
    self.value = value


def first_divergence_metric(
    values: Mapping[str, float],
) -> Optional[tuple[str, float]]:
  """Returns `(name, value)` of the first metric saying training diverged.

  Args:
    values: Flat metric names (`a/b/loss`) to numbers. A loss metric (last
      path component `loss` or `*_loss`, e.g. SCAFFOLD's `train_loss`) that
      is NaN or inf, or a server's
      `update_non_finite` flag that is set, says so.

  Returns:
    The first such metric in `values`' order, or None.
  """
  for name, value in values.items():
    last = name.rsplit('/', 1)[-1]
    is_loss = last == LOSS_SUFFIX or last.endswith('_' + LOSS_SUFFIX)
    if (is_loss and not math.isfinite(value)) or (
        last == NON_FINITE_UPDATE_SUFFIX and value != 0
    ):
      return name, value
  return None


def check_training_finite(
    values: Mapping[str, float],
    *,
    round_num: int,
    experiment_name: str,
    last_checkpoint_round: Optional[int],
) -> None:
  """Raises `TrainingDivergedError` if `values` say training diverged.

  Args:
    values: The round's flat metrics (see `first_divergence_metric`).
    round_num: The round the metrics belong to.
    experiment_name: Named in the message.
    last_checkpoint_round: The round of the newest checkpoint on disk, named
      in the message as the state a rerun resumes from.
  """
  found = first_divergence_metric(values)
  if found is None:
    return
  name, value = found
  skipped = (
      ' (the aggregated update was NaN or inf; the server skipped it)'
      if name.endswith(NON_FINITE_UPDATE_SUFFIX)
      else ''
  )
  kept = (
      ''
      if last_checkpoint_round is None
      else f' The checkpoint of round {last_checkpoint_round} is intact.'
  )
  raise TrainingDivergedError(
      f'{experiment_name}: {name} is {value}{skipped} at round {round_num}; '
      f'stopped before recording that round.{kept} Likely cause: a client or '
      'server learning rate too large for this model and data (or unscaled '
      'input features).',
      round_num,
      name,
      value,
  )
