"""The checks of `build_client_state_process` that read the algorithm or the
model, each naming the argument."""

from typing import Any

import tensorflow as tf

from tff_fedwin.algorithms import sharpness as sharpness_lib
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm as algorithm_lib
from tff_fedwin.algorithms.client_state import client
from tff_fedwin.algorithms.client_state import state_files
from tff_fedwin.losses import labels as labels_lib


def check_algorithm(
    algorithm: Any, client_sharpness: Any, client_state_transfer: Any
) -> None:
  """Raises for an `algorithm` that is not a `ClientStateAlgorithm` (a
  TypeError), or a ValueError for a hook where it is not supported: a
  transfer other than `'values'` without client states, MIME's full-gradient
  round with client states, its start-weights gradient or a feature step
  with a sharpness-aware step (whose gradient they would replace), or a
  feature step with client states."""
  if not isinstance(algorithm, algorithm_lib.ClientStateAlgorithm):
    raise TypeError(
        '`algorithm` must be a ClientStateAlgorithm (tff_fedwin.algorithms.'
        f'scaffold.Scaffold, feddyn.FedDyn), got {type(algorithm).__name__}.'
    )
  sharpness_lib.check_sharpness(client_sharpness)
  state_files.check_transfer(client_state_transfer)
  if not algorithm.keeps_client_state and client_state_transfer != 'values':
    raise ValueError(
        f'{algorithm.name} keeps no client states: `client_state_transfer` '
        f"must be 'values', got {client_state_transfer!r}."
    )
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
  if algorithm.feature_step is not None and (
      algorithm.keeps_client_state or client_sharpness is not None
  ):
    raise ValueError(
        f'{algorithm.name} reads the features in its own client step: it '
        'keeps no client states and takes no `client_sharpness`, got '
        f'{client_sharpness!r}.'
    )


def checked_input_spec(model_fn: Any, algorithm: Any, client_loss: str) -> Any:
  """The model's `input_spec`, once `model_fn` is checked.

  Raises:
    ValueError: Unless `model_fn` builds a `VariableModel` with
      floating-point weights; with a `feature_step`, one with features
      (a `step_hooks.HasFeatures`, e.g. a task's `feature_model_fn`'s);
      with WSM, one whose input spec has integer labels.
  """
  if not callable(model_fn):
    raise ValueError('`model_fn` must be a no-arg callable.')
  for spec in tf.nest.flatten(client.model_weights_specs(model_fn)):
    if not spec.dtype.is_floating:
      raise ValueError(
          '`model_fn` must build a model with floating-point weights; found '
          f'a weight of dtype {spec.dtype.name}.'
      )
  with tf.Graph().as_default():
    model = model_fn()
  if algorithm.feature_step is not None and not isinstance(
      model, step_hooks.HasFeatures
  ):
    raise ValueError(
        f'{algorithm.name} needs `model_fn` to build a model with features '
        'and classifier apart (tff_fedwin.tasks.feature_model.FeatureModel, '
        f"a task's `feature_model_fn`); got {type(model).__name__}."
    )
  if client_loss == 'wsm':
    try:
      labels_lib.integer_label_spec(model.input_spec, client.LABEL_KEY)
    except (KeyError, TypeError) as error:
      raise ValueError(
          f"client_loss='wsm' needs integer class labels under "
          f'{client.LABEL_KEY!r} or at index 1 of (x, y) batches; the '
          f"model's input_spec is {model.input_spec}: {error.args[0]}"
      ) from error
  return model.input_spec
