"""The parts of an algorithm a config selects: its optimizers, client rate
schedule, sharpness, WSM classes and client-state math (`registry` builds
the runners from them). `config` is a validated `ExperimentConfig`.
"""

from collections.abc import Callable
from typing import Optional

import tensorflow_federated as tff

from tff_fedwin.algorithms import adabest
from tff_fedwin.algorithms import client_state
from tff_fedwin.algorithms import fedacg
from tff_fedwin.algorithms import fedcm
from tff_fedwin.algorithms import fedfa
from tff_fedwin.algorithms import fedgma
from tff_fedwin.algorithms import feddyn
from tff_fedwin.algorithms import mime
from tff_fedwin.algorithms import scaffold
from tff_fedwin.algorithms import scheduled_client_work
from tff_fedwin.algorithms import sharpness
from tff_fedwin.experiments import algorithm_flags
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import task_defaults
from tff_fedwin.tasks import registry as tasks_registry
from tff_fedwin.training import sampling

SERVER_MOMENTUM = 0.9  # FedAvgM (Hsu et al. 2019).
# The adaptive ones of `task_defaults.SERVER_OPTIMIZERS`' names.
_ADAPTIVE_OPTIMIZERS = {
    'adam': tff.learning.optimizers.build_adam,
    'yogi': tff.learning.optimizers.build_yogi,
}
# Each `choices.CLIENT_STATE_FAMILY` algorithm's math, built from its
# `algorithm_flags.ALGORITHM_HPARAMS` in their order.
_CLIENT_STATE_ALGORITHMS = {
    'scaffold': scaffold.Scaffold,
    'feddyn': feddyn.FedDyn,
    'adabest': adabest.AdaBest,
    'fedcm': fedcm.FedCM,
    'fedacg': fedacg.FedACG,
    'mime': mime.Mime,
    'fedgma': fedgma.FedGma,
    'fedfa': fedfa.FedFa,
}


def server_optimizer(config: config_lib.ExperimentConfig):
  """FedAvgM: SGD with momentum 0.9; FedAdam, FedYogi; otherwise plain SGD
  (`task_defaults.SERVER_OPTIMIZERS` names each algorithm's)."""
  lr = config.server_learning_rate
  kind = task_defaults.SERVER_OPTIMIZERS[config.algorithm]
  if kind not in _ADAPTIVE_OPTIMIZERS:
    momentum = SERVER_MOMENTUM if kind == 'sgdm' else None
    return tff.learning.optimizers.build_sgdm(lr, momentum=momentum)
  # Unset: TFF's own epsilon (1e-7 for Adam, 1e-3 for Yogi).
  epsilon = config.server_epsilon
  return _ADAPTIVE_OPTIMIZERS[kind](
      lr, **({} if epsilon is None else dict(epsilon=epsilon))
  )


def client_optimizer(config: config_lib.ExperimentConfig):
  """Client SGD; with --client_momentum m > 0, TFF's SGDM (a = m a + g).

  Without momentum the optimizer keeps no accumulator, as before the flag
  existed, so the state (and checkpoints) of such runs is unchanged.
  """
  return tff.learning.optimizers.build_sgdm(
      config.client_learning_rate, momentum=config.client_momentum or None
  )


def num_classes(config: config_lib.ExperimentConfig, task: tasks_registry.Task):
  return task.num_classes if config.client_loss == 'wsm' else None


def client_sharpness(
    config: config_lib.ExperimentConfig,
) -> Optional[sharpness.Sharpness]:
  """`--client_sharpness` as the clients' `Sharpness`, or None ('none')."""
  if config.client_sharpness == 'none':
    return None
  return sharpness.build_sharpness(
      config.client_sharpness, config.sam_rho, config.sam_eta
  )


def client_learning_rate_fn(
    config: config_lib.ExperimentConfig,
) -> Optional[scheduled_client_work.ClientLearningRateFn]:
  """`--client_lr_schedule`'s rate per round; None for `constant`."""
  lr0, t_s = config.client_learning_rate, config.window_start_round
  schedule = config.client_lr_schedule
  if schedule == 'constant':
    return None
  if schedule == 'decay':
    return scheduled_client_work.exponential_client_learning_rate_fn(lr0)
  if schedule == 'ima':
    return scheduled_client_work.ima_client_learning_rate_fn(lr0, t_s)
  if schedule == 'ima_constant':
    return scheduled_client_work.ima_constant_client_learning_rate_fn(
        lr0, t_s, config.client_lr_low
    )
  if schedule == 'swa_cyclic':
    return scheduled_client_work.swa_cyclic_client_learning_rate_fn(
        lr0, config.swa_start_round, config.client_lr_low, config.swa_cycle
    )
  return scheduled_client_work.ima_cyclic_client_learning_rate_fn(
      lr0, t_s, config.client_lr_low, config.client_lr_cycle
  )


def client_epochs_fn(
    config: config_lib.ExperimentConfig,
) -> Optional[Callable[[int], int]]:
  """`--client_epochs_decay_every`'s local epochs per round (IMA's epoch
  decay from `--window_start_round`); None when off."""
  if not config.client_epochs_decay_every:
    return None
  return sampling.epoch_decay_fn(
      config.client_epochs,
      config.window_start_round,
      config.client_epochs_decay_every,
  )


def client_state_algorithm(
    config: config_lib.ExperimentConfig,
) -> client_state.ClientStateAlgorithm:
  """The math of a `choices.CLIENT_STATE_FAMILY` algorithm."""
  hparams = algorithm_flags.ALGORITHM_HPARAMS.get(config.algorithm, {})
  return _CLIENT_STATE_ALGORITHMS[config.algorithm](
      *(getattr(config, flag) for flag in hparams)
  )


def client_model_fn(
    config: config_lib.ExperimentConfig, task: tasks_registry.Task
):
  """The `model_fn` the clients train: the task's `feature_model_fn` for
  FedFA (features and classifier apart), else its `model_fn`."""
  if config.algorithm == 'fedfa':
    return task.feature_model_fn
  return task.model_fn
