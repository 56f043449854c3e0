"""The algorithm registry: `--algorithm` name -> builder of its round runner.

A builder takes the validated `ExperimentConfig`, the task and the number of
training clients and returns a `tff_fedwin.training.RoundRunner`.
"""

from collections.abc import Callable, Mapping
import types
from typing import Any

import tensorflow_federated as tff

from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import mime_lite
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold
from tff_fedwin.algorithms import scheduled_client_work
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.tasks import registry as tasks_registry
from tff_fedwin.training import runner as runner_lib

SERVER_MOMENTUM = 0.9  # FedAvgM (Hsu et al. 2019).

RunnerBuilder = Callable[
    [config_lib.ExperimentConfig, tasks_registry.Task, int],
    runner_lib.RoundRunner,
]


def _server_optimizer(config: config_lib.ExperimentConfig):
  """FedAvgM: SGD with momentum 0.9; FedAdam, FedYogi; otherwise plain SGD."""
  lr = config.server_learning_rate
  if config.algorithm == 'fedavgm':
    return tff.learning.optimizers.build_sgdm(lr, momentum=SERVER_MOMENTUM)
  if config.algorithm == 'fedadam':
    return tff.learning.optimizers.build_adam(lr)
  if config.algorithm == 'fedyogi':
    return tff.learning.optimizers.build_yogi(lr)
  return tff.learning.optimizers.build_sgdm(lr)


def _client_optimizer(config: config_lib.ExperimentConfig):
  return tff.learning.optimizers.build_sgdm(config.client_learning_rate)


def _num_classes(
    config: config_lib.ExperimentConfig, task: tasks_registry.Task
):
  return task.num_classes if config.client_loss == 'wsm' else None


def _window_arguments(config: config_lib.ExperimentConfig) -> dict[str, Any]:
  """The `window_*` arguments of our builders (no window: `window_size=None`)."""
  return dict(
      window_size=config.window_size or None,
      window_mode=config.window_mode,
      window_start_round=config.window_start_round,
      window_read_every=config.window_read_every,
  )


def _fed_win_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
) -> runners.LearningProcessRunner:
  """`build_fed_win` (FedAvg family, FedProx, WSM, IMA schedule)."""
  del num_train_clients  # Unused.
  learning_rate_fn = None
  if config.client_lr_schedule == 'ima':
    learning_rate_fn = scheduled_client_work.ima_client_learning_rate_fn(
        config.client_learning_rate, config.window_start_round
    )
  process = fed_win.build_fed_win(
      task.model_fn,
      _client_optimizer(config),
      _server_optimizer(config),
      **_window_arguments(config),
      client_learning_rate_fn=learning_rate_fn,
      client_loss=config.client_loss,
      num_classes=_num_classes(config, task),
      proximal_strength=(
          config.proximal_strength if config.algorithm == 'fedprox' else 0.0
      ),
  )
  return runners.LearningProcessRunner(process)


def _mime_lite_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
) -> runners.LearningProcessRunner:
  """TFF's Mime Lite with the window as aggregator (cross-entropy only)."""
  del num_train_clients  # Unused.
  process = mime_lite.build_mime_lite_with_window(
      task.model_fn,
      _client_optimizer(config),
      _server_optimizer(config),
      **_window_arguments(config),
  )
  return runners.LearningProcessRunner(process)


def _scaffold_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
) -> runners.ScaffoldRunner:
  """`build_scaffold` with its window; the clients start from c_i = 0."""
  process = scaffold.build_scaffold(
      task.model_fn,
      client_learning_rate=config.client_learning_rate,
      server_learning_rate=config.server_learning_rate,
      total_clients=num_train_clients,
      client_loss=config.client_loss,
      num_classes=_num_classes(config, task),
      window_size=config.window_size or None,
      window_mode=config.window_mode,
      window_start_round=config.window_start_round,
  )
  return runners.ScaffoldRunner(
      process, scaffold.initial_client_state(task.model_fn)
  )


RUNNER_BUILDERS: Mapping[str, RunnerBuilder] = types.MappingProxyType(
    {
        'fedavg': _fed_win_runner,
        'fedavgm': _fed_win_runner,
        'fedadam': _fed_win_runner,
        'fedyogi': _fed_win_runner,
        'fedprox': _fed_win_runner,
        'mime_lite': _mime_lite_runner,
        'scaffold': _scaffold_runner,
    }
)


def build_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
) -> runner_lib.RoundRunner:
  """The runner of `config.algorithm` (a validated config) on `task`."""
  return RUNNER_BUILDERS[config.algorithm](config, task, num_train_clients)
