"""Argument checks of `build_client_state_process`, each naming the argument."""

from typing import Any

import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin.aggregators import window_math
from tff_fedwin.algorithms.client_state import client
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.losses import labels as labels_lib


def check_rates_and_clients(
    *, client_learning_rate: Any, server_learning_rate: Any, total_clients: Any
) -> int:
  """Checks the positive learning rates and N; returns `int(total_clients)`."""
  checks.check_number(
      'client_learning_rate', client_learning_rate, positive=True
  )
  checks.check_number(
      'server_learning_rate', server_learning_rate, positive=True
  )
  return checks.check_int('total_clients', total_clients, minimum=1)


def check_window_args(
    window_size: Any, window_mode: Any, window_start_round: Any
) -> None:
  """Raises ValueError naming a bad window argument (`window_math`'s checks).

  The window is read every round (E = 1); without a window
  (`window_size=None`) the mode and start round are still checked.
  """
  window_math.check_window_args(
      window_size=1 if window_size is None else window_size,
      mode=window_mode,
      start_round=window_start_round,
      read_every=1,
      prefix='window_',
  )


def check_model(model_fn: Any) -> None:
  """Raises ValueError unless `model_fn` builds a float-weight model."""
  if not callable(model_fn):
    raise ValueError('`model_fn` must be a no-arg callable.')
  for spec in tf.nest.flatten(client.model_weights_specs(model_fn)):
    if not spec.dtype.is_floating:
      raise ValueError(
          '`model_fn` must build a model with floating-point weights; found '
          f'a weight of dtype {spec.dtype.name}.'
      )


def check_wsm_labels(input_spec: Any) -> None:
  """Raises ValueError unless WSM finds integer labels in `input_spec`."""
  try:
    labels_lib.integer_label_spec(input_spec, client.LABEL_KEY)
  except (KeyError, TypeError) as error:
    raise ValueError(
        f"client_loss='wsm' needs integer class labels under "
        f"{client.LABEL_KEY!r} or at index 1 of (x, y) batches; the model's "
        f'input_spec is {input_spec}: {error.args[0]}'
    ) from error


def check_full_gradient(algorithm: Any, client_sharpness: Any) -> None:
  """Raises ValueError for MIME's hooks where they are not supported: a
  full-gradient round with client states, or the start-weights gradient
  with a sharpness-aware step (whose second gradient it would replace)."""
  if algorithm.uses_full_gradient and algorithm.keeps_client_state:
    raise ValueError(
        f'{algorithm.name}: `uses_full_gradient` is supported only without '
        'client states (`keeps_client_state` False).'
    )
  if algorithm.subtracts_start_gradient and client_sharpness is not None:
    raise ValueError(
        f'{algorithm.name} subtracts the gradient at the start weights from '
        'every step: `client_sharpness` must be None, got '
        f'{client_sharpness!r}.'
    )


def check_feature_step(algorithm: Any, model_fn: Any, client_sharpness: Any):
  """Raises ValueError for a `feature_step` where it is not supported: with
  client states, with a sharpness-aware step, or on a model without features
  (not a `step_hooks.HasFeatures`, e.g. a task's `feature_model_fn`'s)."""
  if algorithm.feature_step is None:
    return
  if algorithm.keeps_client_state or client_sharpness is not None:
    raise ValueError(
        f'{algorithm.name} reads the features in its own client step: it '
        'keeps no client states and takes no `client_sharpness`, got '
        f'{client_sharpness!r}.'
    )
  with tf.Graph().as_default():
    model = model_fn()
  if not isinstance(model, step_hooks.HasFeatures):
    raise ValueError(
        f'{algorithm.name} needs `model_fn` to build a model with features '
        'and classifier apart (tff_fedwin.tasks.feature_model.FeatureModel, '
        f"a task's `feature_model_fn`); got {type(model).__name__}."
    )
