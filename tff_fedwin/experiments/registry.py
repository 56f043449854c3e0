"""The algorithm registry: `--algorithm` name -> builder of its round runner.

A builder takes the validated `ExperimentConfig`, the task, the number of
training clients and the run's `TransferDirs` and returns a
`tff_fedwin.training.RoundRunner`.
"""

from collections.abc import Callable, Mapping
import math
import os
import time
import types
from typing import Any, NamedTuple, Optional

from absl import logging
import attrs
import tensorflow_federated as tff

from tff_fedwin import choices
from tff_fedwin.algorithms import client_data_bundle
from tff_fedwin.algorithms import client_state
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import fednova
from tff_fedwin.algorithms import mime_lite
from tff_fedwin.algorithms import partial_window_runner
from tff_fedwin.algorithms import program_window_runner
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import swa_runner
from tff_fedwin.experiments import algorithm_parts
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import task_defaults
from tff_fedwin.experiments import worker_flags
from tff_fedwin.tasks import registry as tasks_registry
from tff_fedwin.training import outputs
from tff_fedwin.training import runner as runner_lib
from tff_fedwin.training import sampling

# 'auto' keeps a window above this many bytes of slots in the program: e.g.
# 7 models of the 1.2M-parameter EMNIST CNN (4.8 MB each).
AUTO_PROGRAM_WINDOW_BYTES = 32 * 2**20

RunnerBuilder = Callable[
    [config_lib.ExperimentConfig, tasks_registry.Task, int, 'TransferDirs'],
    runner_lib.RoundRunner,
]


def _window_arguments(config: config_lib.ExperimentConfig) -> dict[str, Any]:
  """The `window_*` arguments of our builders (no window: `window_size=None`)."""
  return dict(
      window_size=config.window_size or None,
      window_mode=config.window_mode,
      window_start_round=config.window_start_round,
      window_read_every=config.window_read_every,
  )


class TransferDirs(NamedTuple):
  """Where the files transfer modes put their files (none is a checkpoint).

  Attributes:
    root: Their parent: the run directory, or the run's directory in
      `--shared_dir`. The run holds it for its life (`training.run_lock`).
    client_state_files: The sampled clients' states (SCAFFOLD, FedDyn), every
      round.
    server_state_files: The server state between rounds.
    client_data: The training examples' bundle, written at every start.
  """

  root: str
  client_state_files: str
  server_state_files: str
  client_data: str


def transfer_dirs(
    config: config_lib.ExperimentConfig, run_id: Optional[str] = None
) -> TransferDirs:
  """The directories of the files transfer modes of `config`.

  Without `--shared_dir`, the run directory's `client_state_files/`,
  `server_state_files/` and `client_data/` (seen by the workers this run
  starts). With it, the same names under `<shared_dir>/<experiment_name>-
  <run_id>`: one directory per run (`run_record.check_or_write` returns its
  id), so runs sharing a `--shared_dir` and an `--experiment_name` never
  meet, wherever their run directories are.

  Raises:
    ValueError: With `--shared_dir` and no `run_id`, or a `run_id` that is
      not one path component.
  """
  if config.shared_dir is None:
    root = outputs.RunPaths(config.root_output_dir, config.experiment_name).root
  else:
    if not run_id or os.sep in run_id or run_id in (os.curdir, os.pardir):
      raise ValueError(
          "A run's directory in --shared_dir is named by its run id "
          f'(run_record.check_or_write); got {run_id!r}.'
      )
    root = os.path.join(
        os.path.abspath(config.shared_dir),
        f'{config.experiment_name}-{run_id}',
    )
  return TransferDirs(
      root=root,
      client_state_files=os.path.join(root, outputs.CLIENT_STATE_FILES_DIR),
      server_state_files=os.path.join(root, outputs.SERVER_STATE_FILES_DIR),
      client_data=os.path.join(root, outputs.CLIENT_DATA_DIR),
  )


def _dataset_computation(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    dirs: TransferDirs,
) -> Optional[tff.Computation]:
  """With `--client_data_transfer` resolving to files: `(client key ->
  preprocessed dataset)` (`sampling.keyed_dataset_computation`: the round's
  shuffle seed and the client id), which the workers run; else None (the loop sends
  the datasets as values). Training data whose `dataset_computation` holds
  no examples (`client_data_bundle.builds_datasets_from_ids`: EMNIST and
  StackOverflow's `SqlClientData`, a query per id; synthetic populations)
  is used as it is; any other is first written to the run's `client_data/`
  (`dirs.client_data`) as a tensor bundle (`run_experiment` removes it when
  the run ends)."""
  if worker_flags.resolve(config, 'client_data_transfer') != 'files':
    return None
  with_epochs = algorithm_parts.client_epochs_fn(config) is not None
  if client_data_bundle.builds_datasets_from_ids(task.train_data):
    return sampling.keyed_dataset_computation(
        task.train_data, task.preprocess_fn, with_epochs
    )
  directory = dirs.client_data
  os.makedirs(directory, mode=0o700, exist_ok=True)
  start = time.monotonic()
  bundle = client_data_bundle.write_client_data_bundle(
      task.train_data, os.path.join(directory, 'train')
  )
  logging.info(
      "Wrote the %d training clients' examples to %s in %.1f s.",
      len(bundle.client_ids),
      directory,
      time.monotonic() - start,
  )
  return sampling.keyed_dataset_computation(
      bundle, task.preprocess_fn, with_epochs
  )


def _fed_win_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
    dirs: TransferDirs,
) -> runners.LearningProcessRunner:
  """`build_fed_win` (FedAvg family, FedProx, FedNova, WSM, schedules)."""
  del num_train_clients  # Unused.
  process = fed_win.build_fed_win(
      task.model_fn,
      algorithm_parts.client_optimizer(config),
      algorithm_parts.server_optimizer(config),
      **_window_arguments(config),
      client_learning_rate_fn=algorithm_parts.client_learning_rate_fn(config),
      client_loss=config.client_loss,
      num_classes=algorithm_parts.num_classes(config, task),
      proximal_strength=(
          config.proximal_strength if config.algorithm == 'fedprox' else 0.0
      ),
      client_weight_decay=config.client_weight_decay,
      client_sharpness=algorithm_parts.client_sharpness(config),
      fednova=(
          fednova.build_fednova(config.client_momentum)
          if config.algorithm == 'fednova'
          else None
      ),
  )
  return runners.LearningProcessRunner(
      process, **_runner_arguments(config, task, dirs)
  )


def _runner_arguments(config, task, dirs: TransferDirs) -> dict[str, Any]:
  """Every runner's arguments: the extra windows, the server state's and the
  clients' data transfers."""
  return dict(
      extra_window_sizes=config_lib.parse_window_sizes(config),
      # The state between rounds (not a checkpoint).
      server_state_dir=(
          dirs.server_state_files
          if worker_flags.resolve(config, 'server_state_transfer') == 'files'
          else None
      ),
      dataset_computation=_dataset_computation(config, task, dirs),
  )


def _mime_lite_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
    dirs: TransferDirs,
) -> runners.LearningProcessRunner:
  """TFF's Mime Lite with the window as aggregator (cross-entropy only)."""
  del num_train_clients  # Unused.
  process = mime_lite.build_mime_lite_with_window(
      task.model_fn,
      algorithm_parts.client_optimizer(config),
      algorithm_parts.server_optimizer(config),
      **_window_arguments(config),
  )
  return runners.LearningProcessRunner(
      process, **_runner_arguments(config, task, dirs)
  )


def _client_state_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
    dirs: TransferDirs,
) -> runner_lib.RoundRunner:
  """`build_client_state_process` (`choices.CLIENT_STATE_FAMILY`) with its
  window: a `ClientStateRunner` whose clients start from a zero vector, or
  for FedCM and FedACG (no client states) a `LearningProcessRunner`.

  With `client_state_transfer` 'files' the round's client states go through
  the run's `client_state_files/` (`dirs`; rewritten every round; not a
  checkpoint).
  """
  keeps_states = config.algorithm in choices.CLIENT_STATE_ALGORITHMS
  transfer = 'values'
  if keeps_states:
    transfer = worker_flags.resolve(config, 'client_state_transfer')
  algorithm = algorithm_parts.client_state_algorithm(config)
  process = client_state.build_client_state_process(
      algorithm_parts.client_model_fn(config, task),
      algorithm,
      client_learning_rate=config.client_learning_rate,
      server_learning_rate=config.server_learning_rate,
      total_clients=num_train_clients,
      client_loss=config.client_loss,
      num_classes=algorithm_parts.num_classes(config, task),
      client_weight_decay=config.client_weight_decay,
      client_sharpness=algorithm_parts.client_sharpness(config),
      window_size=config.window_size or None,
      window_mode=config.window_mode,
      window_start_round=config.window_start_round,
      client_state_transfer=transfer,
      client_learning_rate_fn=algorithm_parts.client_learning_rate_fn(config),
  )
  shared = _runner_arguments(config, task, dirs)
  if not keeps_states:
    return runners.LearningProcessRunner(process, **shared)
  return runners.ClientStateRunner(
      process,
      client_state.initial_client_state(task.model_fn, algorithm),
      state_files_dir=(
          dirs.client_state_files if transfer == 'files' else None
      ),
      **shared,
  )


RUNNER_BUILDERS: Mapping[str, RunnerBuilder] = types.MappingProxyType(
    {
        **dict.fromkeys(
            ('fedavg', 'fedavgm', 'fedadam', 'fedyogi', 'fedprox', 'fednova'),
            _fed_win_runner,
        ),
        'mime_lite': _mime_lite_runner,
        **dict.fromkeys(choices.CLIENT_STATE_FAMILY, _client_state_runner),
    }
)


def _trainable_bytes(task: tasks_registry.Task) -> int:
  """The bytes of one copy of the task model's trainable weights."""
  return sum(
      v.shape.num_elements() * v.dtype.size
      for v in task.model_fn().trainable_variables
  )


def window_location(
    config: config_lib.ExperimentConfig, task: tasks_registry.Task
) -> Optional[str]:
  """`'state'` or `'program'` for a run with a window; None without one.

  `'auto'` keeps the window in the process state while its slots (ceil(W/E), W
  for the client-state family and IMA) take at most `AUTO_PROGRAM_WINDOW_BYTES`, and in the
  program above: a state window's bytes cross the Python boundary twice a round
  (docs/performance.md, 'The window: segment sums instead of a ring buffer').
  With extra `--window_sizes`, `'auto'` picks the program, which keeps any
  sizes; the state keeps only sizes its window holds (docs/design.md sec. 1.11).
  """
  if not config.window_size:
    return None
  if config.window_location != 'auto':
    return config.window_location
  if config_lib.parse_window_sizes(config):
    return 'program'
  slots = config.window_size
  if config.algorithm not in choices.CLIENT_STATE_FAMILY:
    slots = math.ceil(config.window_size / config.window_read_every)
  state_bytes = slots * _trainable_bytes(task)
  return 'program' if state_bytes > AUTO_PROGRAM_WINDOW_BYTES else 'state'


def build_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
    *,
    run_id: Optional[str] = None,
) -> runner_lib.RoundRunner:
  """The runner of `config.algorithm` (a validated config) on `task`.

  Unset learning rates take `task`'s defaults (`task_defaults`). Its files
  go to `transfer_dirs(config, run_id)` (`run_id` is needed with
  `--shared_dir`).

  With the window kept by the program, the algorithm's runner is built
  without a window and wrapped in a `ProgramWindowRunner`; with
  `--window_part` other than all, in a `PartialWindowRunner` (WiMA
  Table 5); with `--swa_start_round`, in a `SwaRunner` (server-side SWA).
  With `--client_data_transfer` resolving to files, writes the training
  examples to the run's `client_data/` (`run_experiment` removes it at the
  end).
  """
  config = task_defaults.with_defaults_of_task(config, task)
  runner = _windowed_runner(
      config, task, num_train_clients, transfer_dirs(config, run_id)
  )
  if config.swa_start_round:  # Never with a window (check_swa_flags).
    runner = swa_runner.SwaRunner(
        runner, start_round=config.swa_start_round, cycle=config.swa_cycle
    )
  if config.window_part == 'all':
    return runner
  names = [v.name for v in task.model_fn().trainable_variables]
  return partial_window_runner.PartialWindowRunner(
      runner,
      config.window_part,
      partial_window_runner.classifier_variable_count(names),
  )


def _windowed_runner(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    num_train_clients: int,
    dirs: TransferDirs,
) -> runner_lib.RoundRunner:
  """The algorithm's runner with its window where `window_location` says."""
  build = RUNNER_BUILDERS[config.algorithm]
  if window_location(config, task) != 'program':
    return build(config, task, num_train_clients, dirs)
  # Only the window is dropped: the IMA schedule still reads its start round.
  runner = build(
      attrs.evolve(config, window_size=0, window_sizes=''),
      task,
      num_train_clients,
      dirs,
  )
  return program_window_runner.ProgramWindowRunner(
      runner,
      program_window_runner.ProgramWindow(
          window_size=config.window_size,
          mode=config.window_mode,
          start_round=config.window_start_round,
          read_every=config.window_read_every,
          extra_window_sizes=config_lib.parse_window_sizes(config),
      ),
  )
