"""One experiment from its configuration: task, runner, workers, round loop."""

import contextlib
import shutil
from typing import Any, Optional

from absl import logging

from tff_fedwin import runtime
from tff_fedwin.experiments import algorithm_parts
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import context
from tff_fedwin.experiments import data_files as data_files_lib
from tff_fedwin.experiments import problems
from tff_fedwin.experiments import registry
from tff_fedwin.experiments import run_record
from tff_fedwin.experiments import task_defaults
from tff_fedwin.experiments import worker_flags
from tff_fedwin.runtime import shared_dir
from tff_fedwin.tasks import registry as tasks_registry
from tff_fedwin.tasks import task as task_lib
from tff_fedwin.training import disk_full
from tff_fedwin.training import loop
from tff_fedwin.training import outputs
from tff_fedwin.training import run_lock
from tff_fedwin.training import sampling

# The `TaskOptions` fields whose `ExperimentConfig` field has another name;
# the others have the same (`leaf_options` is built, `data_files.leaf_options`).
_CONFIG_FIELDS = {
    'batch_size': 'client_batch_size',
    'epochs': 'client_epochs',
    'shuffle_buffer': 'client_shuffle_buffer',
}


def create_task(config: config_lib.ExperimentConfig) -> tasks_registry.Task:
  """The task of `config`; its data errors name the file or the flags."""
  try:
    with config_lib.as_input_data_error():
      task = tasks_registry.create_task(
          config.task,
          leaf_options=data_files_lib.leaf_options(config),
          **{
              option: getattr(config, _CONFIG_FIELDS.get(option, option))
              for option in tasks_registry.TaskOptions._fields
              if option != 'leaf_options'
          },
      )
  except tasks_registry.DataUnavailableError as e:
    raise tasks_registry.DataUnavailableError(
        f'{e} (flags: --cache_dir, --use_synthetic_data)'
    ) from e
  if config.client_loss == 'wsm' and task.pad_label is not None:
    raise config_lib.InputDataError(
        f'--client_loss=wsm needs one label per example; --task={config.task}'
        ' here predicts a sequence of tokens (use --client_loss=ce).'
    )
  task = task_lib.with_max_elements(
      task, config.client_max_elements, config.client_batch_size
  )
  if config.algorithm == 'fedfa' and task.feature_model_fn is None:
    raise config_lib.InputDataError(
        f'--algorithm=fedfa needs a model with its features apart (a '
        f'Sequential image model); --task={config.task} has none (tasks with '
        'one: mnist, npz).'
    )
  if config.client_epochs_decay_every and not sampling.takes_epochs(
      task.preprocess_fn
  ):
    raise config_lib.InputDataError(
        f"--client_epochs_decay_every needs a task that repeats its clients' "
        f"data by epochs itself; --task={config.task} uses TFF's own "
        'preprocessing (set it to 0).'
    )
  return task


@contextlib.contextmanager
def client_data_removed_at_exit(
    config: config_lib.ExperimentConfig, run_id: Optional[str] = None
):
  """Removes the run's `client_data/` when the block exits.

  It is derived data: the training examples' bundle that
  `registry.build_runner` writes at every start when the clients' data go
  by id (`--client_data_transfer`); a resumed run writes it again. It is in
  `registry.transfer_dirs(config, run_id)` (under `--shared_dir`, in the
  run's own directory there, when that is given): nothing outside the run's
  own directory is removed.
  """
  directory = registry.transfer_dirs(config, run_id).client_data
  try:
    yield
  finally:
    shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def transfer_dir_held(config: config_lib.ExperimentConfig, run_id: str):
  """Holds the run's transfer directory while the block runs.

  `registry.transfer_dirs(config, run_id).root`: with `--shared_dir`,
  `<shared_dir>/<experiment_name>-<run_id>`, locked (`training.run_lock`,
  its `.lock`) for the block, released at its exit, also on failure;
  without, the run directory, which the run holds already.

  Raises:
    TransferDirectoryLockedError: One line naming the directory, if another
      process holds it (a driver of the same run id).
  """
  with run_lock.hold(
      registry.transfer_dirs(config, run_id).root,
      run_lock.TransferDirectoryLockedError,
  ):
    yield


def run_experiment(
    config: config_lib.ExperimentConfig, *, stop_after_round: int = 0
) -> dict[str, Any]:
  """Validates `config`, builds task and process, trains; returns the summary.

  The summary is `tff_fedwin.training.run_training`'s. Bad flags raise
  ValueError, data that does not fit `InputDataError`, both before any worker
  starts or output is written. Then the run holds its directory
  (`training.run_lock`: `RunDirectoryLockedError` if another process does)
  and writes or checks its record (`run_record.check_or_write`:
  `RunConfigMismatchError` for a resume with other flags), both before any
  TFF work, and holds its transfer directory (`transfer_dir_held`:
  `TransferDirectoryLockedError` if another driver of the same run id
  does) before any worker starts; a worker lost mid-run raises
  `run_record.WorkerLostError`, one line naming it and the round a rerun
  resumes from.

  Args:
    config: The experiment.
    stop_after_round: If not 0, train only up to this round (1 <= it <
      `config.total_rounds`; checkpointed, the summary's `total_rounds` says
      so), e.g. to fork another run there; the same config later resumes.
  """
  config_lib.validate_config(config)
  total_rounds = config.total_rounds
  if stop_after_round:
    if not 1 <= stop_after_round < total_rounds:
      raise ValueError(
          f'`stop_after_round` must be 0 or in [1, {total_rounds}); got '
          f'{stop_after_round}.'
      )
    total_rounds = stop_after_round
  task = create_task(config)
  # Recorded as trained: the task's learning rates where the flags set none.
  config = task_defaults.with_defaults_of_task(config, task)
  config_lib.check_clients_per_round(config, len(task.train_data.client_ids))
  run_dir = outputs.RunPaths(config.root_output_dir, config.experiment_name)
  with run_lock.hold(run_dir.root):
    # Before any TFF work or change in the run directory but its lock.
    with disk_full.as_one_line(None):
      run_id = run_record.check_or_write(config, run_dir.root)
    try:
      with transfer_dir_held(config, run_id):
        return _train(config, task, total_rounds, run_id)
    except runtime.WorkerUnavailableError as e:
      _, addresses = worker_flags.parse_workers(config.workers)
      raise run_record.worker_lost(
          e, e.address, run_dir.root, remote=bool(addresses)
      ) from e


def check_shared_dir(
    config: config_lib.ExperimentConfig,
    execution_context: Any,
    run_id: Optional[str] = None,
) -> None:
  """With `--shared_dir` (and a files mode), every worker must see it.

  Logs what each `--*_transfer` resolved to, then runs
  `runtime.shared_dir.check_shared_dir` on the workers of
  `execution_context` (a `runtime.MultiWorkerContext`'s addresses, else the
  installed single worker's context). Before the first round.

  Raises:
    SharedDirError: One line naming the worker, the directory, the way out.
  """
  files_flags = worker_flags.files_transfer_flags(config)
  if not files_flags:
    logging.info('Transfers: all values.')
    return
  logging.info(
      'Transfers: %s files (in %s), the rest values.',
      ', '.join(files_flags),
      registry.transfer_dirs(config, run_id).root,
  )
  if config.shared_dir is None:
    return
  addresses = ()
  if isinstance(execution_context, runtime.MultiWorkerContext):
    addresses = execution_context.addresses
  shared_dir.check_shared_dir(
      config.shared_dir, addresses, flags=problems.listed(files_flags, 'and')
  )


def _train(
    config: config_lib.ExperimentConfig,
    task: tasks_registry.Task,
    total_rounds: int,
    run_id: str,
) -> dict[str, Any]:
  """Starts the workers, builds the runner, runs the round loop."""
  num_train_clients = len(task.train_data.client_ids)
  with (
      context.execution_context(
          config.workers, config.worker_bind
      ) as execution_context,
      client_data_removed_at_exit(config, run_id),
  ):
    check_shared_dir(config, execution_context, run_id)
    with disk_full.as_one_line(None):  # It may write client_data/.
      runner = registry.build_runner(
          config, task, num_train_clients, run_id=run_id
      )
    return loop.run_training(
        runner,
        train_client_data=task.train_data,
        preprocess_fn=task.preprocess_fn,
        clients_per_round=config.clients_per_round,
        total_rounds=total_rounds,
        seed=config.seed,
        evaluate_fn=task.build_evaluate_fn(config.eval_per_client),
        rounds_per_eval=config.rounds_per_eval,
        rounds_per_checkpoint=config.rounds_per_checkpoint,
        output_dir=config.root_output_dir,
        experiment_name=config.experiment_name,
        summary_last_n=config.summary_last_n,
        client_states=config.client_states,
        client_states_dir=config.client_states_dir or None,
        client_epochs_fn=algorithm_parts.client_epochs_fn(config),
    )
