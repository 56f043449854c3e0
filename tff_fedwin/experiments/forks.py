"""Forked experiment runs: a config trained from another config's run.

Two configs that differ only by their window (none, W = 1, the same W from
another start round) and their client learning-rate schedule train the same
rounds until a window first acts or the schedules part (docs/design.md sec.
5.6). `fork_round` finds the last eval round k before that; `fork_config_run`
writes the target's run directory from the trunk's checkpoint of round k, so
`run_experiment(target)` resumes at k + 1 and ends bit for bit as a run from
round 1 would.
"""

import json
import os
from collections.abc import Sequence
from typing import Any, Optional

import attrs

from tff_fedwin.algorithms import fed_win_fork
from tff_fedwin.algorithms import runners
from tff_fedwin.experiments import algorithm_parts
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import context
from tff_fedwin.experiments import registry
from tff_fedwin.experiments import run as run_lib
from tff_fedwin.experiments import run_record
from tff_fedwin.experiments import schedule_flags
from tff_fedwin.experiments import task_defaults
from tff_fedwin.training import checkpoints
from tff_fedwin.training import divergence
from tff_fedwin.training import forks
from tff_fedwin.training import outputs
from tff_fedwin.training import progress
from tff_fedwin.training import run_lock

# The fields forked configs may differ in (besides where the run is written).
_FORK_FIELDS = (
    'window_size',
    'window_mode',
    'window_start_round',
    'client_lr_schedule',
    'client_lr_low',
    'client_lr_cycle',
    'client_epochs_decay_every',
    'experiment_name',
    'root_output_dir',
)


def run_dir(config: config_lib.ExperimentConfig) -> str:
  """The run directory of `config`: root_output_dir/experiment_name."""
  return os.path.join(config.root_output_dir, config.experiment_name)


def finished(config: config_lib.ExperimentConfig) -> bool:
  """Whether the run has a summary.json of all its rounds.

  A run stopped for a fork (`run_experiment(stop_after_round=k)`) has one of
  k rounds: not finished.
  """
  path = os.path.join(run_dir(config), outputs.SUMMARY_JSON)
  if not os.path.exists(path):
    return False
  with open(path) as f:
    rounds = json.load(f).get('total_rounds', config.total_rounds)
  return rounds == config.total_rounds


def _first_active_round(config: config_lib.ExperimentConfig) -> Optional[int]:
  """The first round the window model is used; None without a window."""
  if not config.window_size:
    return None
  return max(config.window_size, config.window_start_round)


def _schedule_kind(config: config_lib.ExperimentConfig):
  """(the schedule before its turn, the round it turns or None, after it).

  IMA's schedules with start t_s are 'decay' before t_s
  (`scheduled_client_work`); from t_s on they differ by scheme and flags.
  """
  if config.client_lr_schedule in schedule_flags.IMA_SCHEDULES:
    return (
        'decay',
        config.window_start_round,
        schedule_flags.after_start(config),
    )
  return config.client_lr_schedule, None, None


def _schedules_part(
    a: config_lib.ExperimentConfig, b: config_lib.ExperimentConfig
) -> Optional[int]:
  """The first round the two client lr schedules may differ; None if never."""
  (kind_a, turn_a, after_a), (kind_b, turn_b, after_b) = (
      _schedule_kind(a),
      _schedule_kind(b),
  )
  if kind_a != kind_b:
    return 1
  if turn_a == turn_b and after_a == after_b:
    return None
  return min(turn for turn in (turn_a, turn_b) if turn is not None)


def _epochs_part(
    a: config_lib.ExperimentConfig, b: config_lib.ExperimentConfig
) -> Optional[int]:
  """The first round the two configs' local epochs differ (IMA's epoch
  decay); None if never."""
  epochs_a, epochs_b = (
      algorithm_parts.client_epochs_fn(c) or (lambda t, c=c: c.client_epochs)
      for c in (a, b)
  )
  return next(
      (t for t in range(1, a.total_rounds + 1) if epochs_a(t) != epochs_b(t)),
      None,
  )


def _window_rebuildable(
    trunk: config_lib.ExperimentConfig, target: config_lib.ExperimentConfig
) -> bool:
  """The target's window is none, the trunk's layout, or W = E = 1."""
  return (
      not target.window_size
      or target.window_size == trunk.window_size
      or (target.window_size == 1 and target.window_read_every == 1)
  )


def fork_round(
    trunk: config_lib.ExperimentConfig, target: config_lib.ExperimentConfig
) -> Optional[int]:
  """k: the last eval round both configs train alike, or None.

  The configs must be `build_fed_win` runs equal up to `_FORK_FIELDS`, the
  trunk with a window kept in the state and no extra window sizes, the
  target's window rebuildable (`fed_win_fork.forked_state`). k is the last
  multiple of `rounds_per_eval` before the first round a window acts or the
  schedules part, and before the last round.
  """
  same = attrs.evolve(
      target, **{field: getattr(trunk, field) for field in _FORK_FIELDS}
  )
  if (
      same != trunk
      # `build_fed_win` runs (the FedAvg family's runner).
      or registry.RUNNER_BUILDERS[trunk.algorithm]
      is not registry.RUNNER_BUILDERS['fedavg']
      or not trunk.window_size
      or trunk.window_location == 'program'
      or trunk.window_sizes.strip()
      # A fork's checkpoint has no per_client_metrics.csv rows to carry.
      or trunk.eval_per_client
      or not _window_rebuildable(trunk, target)
  ):
    return None
  bounds = [
      _first_active_round(trunk),
      _first_active_round(target),
      _schedules_part(trunk, target),
      _epochs_part(trunk, target),
  ]
  first_apart = min(b for b in bounds if b is not None)
  k = (first_apart - 1) // trunk.rounds_per_eval * trunk.rounds_per_eval
  return k if 1 <= k < trunk.total_rounds else None


def fork_config_run(
    trunk: config_lib.ExperimentConfig,
    target: config_lib.ExperimentConfig,
    round_num: int,
) -> None:
  """Writes `target`'s run directory from `trunk`'s checkpoint of round k.

  The target's directory is held (`training.run_lock`) and gets the
  target's `run_config.json` (`run_record`) with its own run id, so that
  its resume checks its flags as any run's and has its own transfer
  directory in `--shared_dir`.

  Raises:
    ValueError: If k is not `fork_round(trunk, target)`, or a window is kept
      by the program (only state windows fork).
    FileExistsError: If the target has checkpoints already.
    RunDirectoryLockedError: If another process holds the target's directory.
    RunConfigMismatchError: If the target's directory records other flags.
  """
  if round_num != fork_round(trunk, target):
    raise ValueError(
        f'{target.experiment_name} cannot fork from '
        f'{trunk.experiment_name} at round {round_num} (fork_round: '
        f'{fork_round(trunk, target)}).'
    )
  config_lib.validate_config(trunk)
  config_lib.validate_config(target)
  with run_lock.hold(run_dir(target)):
    task = run_lib.create_task(trunk)
    trunk, target = (
        task_defaults.with_defaults_of_task(c, task) for c in (trunk, target)
    )
    # The target's record, as its own first start would write it.
    run_record.check_or_write(target, run_dir(target))
    _fork_held(trunk, target, round_num, task)


def _fork_held(
    trunk: config_lib.ExperimentConfig,
    target: config_lib.ExperimentConfig,
    round_num: int,
    task: Any,
) -> None:
  """`fork_config_run`'s work on the trunk's `task`, the target's directory
  held."""
  num_clients = len(task.train_data.client_ids)
  with context.execution_context(trunk.workers, trunk.worker_bind):
    initial_states = []
    for config in (trunk, target):
      # Only `initialize` runs: no transfer file or directory is made (each
      # run's own, named by its run id, are its resume's).
      config = attrs.evolve(
          config,
          client_data_transfer='values',
          server_state_transfer='values',
          client_state_transfer='values',
          shared_dir=None,
      )
      runner = registry.build_runner(config, task, num_clients)
      if not isinstance(runner, runners.LearningProcessRunner):
        raise ValueError(
            f'{config.experiment_name}: only runs with the window in the '
            'process state fork (this window is kept by the program).'
        )
      initial_states.append(runner.initialize())
  trunk_initial, target_initial = initial_states
  forks.fork_run(
      trunk_dir=run_dir(trunk),
      target_dir=run_dir(target),
      round_num=round_num,
      identity=checkpoints.RunIdentity(
          seed=trunk.seed,
          clients_per_round=trunk.clients_per_round,
          num_clients=num_clients,
      ),
      trunk_initial_state=trunk_initial,
      state_fn=lambda state: fed_win_fork.forked_state(
          state, target_initial, round_num
      ),
      row_fn=lambda row: fed_win_fork.forked_metrics_row(
          row, target.window_size or None
      ),
  )


def fork_pending(
    jobs: Sequence[
        tuple[int, config_lib.ExperimentConfig, config_lib.ExperimentConfig]
    ],
) -> None:
  """Forks each (k, trunk, target) whose target has not started, in order of k.

  Trains the trunk up to k first if it has not reached k (it resumes later
  from there). A target whose trunk is past k (round k no longer kept) or
  diverged before k is left to train from round 1; a line says so.
  """
  for k, trunk, target in sorted(jobs, key=lambda job: job[0]):
    if finished(target) or forks.kept_rounds(run_dir(target)):
      continue  # Finished, started or forked already.
    kept = forks.kept_rounds(run_dir(trunk))
    if k not in kept and max(kept, default=0) > k:
      progress.print_line(
          f'{run_dir(target)}: trains from round 1 ({run_dir(trunk)} is '
          f'past round {k})'
      )
      continue
    if k not in kept:
      try:
        run_lib.run_experiment(trunk, stop_after_round=k)
      except divergence.TrainingDivergedError as e:
        progress.print_line(f'{run_dir(target)}: trains from round 1 ({e})')
        continue
    fork_config_run(trunk, target, k)
    progress.print_line(
        f'forked {run_dir(target)} from {run_dir(trunk)} at round {k}'
    )
