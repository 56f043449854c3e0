"""The round loop: sample, train, evaluate, record, checkpoint, resume.

`run_training` drives any `RoundRunner` for T rounds and resumes a stopped run
exactly (docs/design.md sec. 5).
"""

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Optional

from absl import logging
import tensorflow_federated as tff

from tff_fedwin.training import checkpoint_steps
from tff_fedwin.training import checkpoints as checkpoints_lib
from tff_fedwin.training import client_state_stores
from tff_fedwin.training import disk_full
from tff_fedwin.training import divergence
from tff_fedwin.training import loop_arguments
from tff_fedwin.training import metrics as metrics_lib
from tff_fedwin.training import outputs
from tff_fedwin.training import per_client_csv
from tff_fedwin.training import progress
from tff_fedwin.training import runner as runner_lib
from tff_fedwin.training import sampling


class _Start(NamedTuple):
  """Where the rounds start: a fresh state (round 1) or a restored one."""

  state: Any
  store: Optional[client_state_stores.ClientStates]
  # The store and the runner's files (`RoundRunner.open_files`), if any.
  steps: Optional[checkpoint_steps.CheckpointSteps]
  resumed_from: Optional[int]  # None for a fresh start.


@contextlib.contextmanager
def event_loop() -> Iterator[Any]:
  """`run_until_complete` of a private event loop (tff.program's coroutines)."""
  loop = asyncio.new_event_loop()
  try:
    yield loop.run_until_complete
  finally:
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


def _start(
    runner: runner_lib.RoundRunner,
    checkpoints: checkpoints_lib.Checkpoints,
    args: loop_arguments.Arguments,
) -> _Start:
  """Restores the newest checkpoint, or saves the initial state as version 0."""
  initial_state = runner.initialize()
  template = runner.initial_client_state()

  def open_store(round_num: Optional[int]):
    if template is None:
      return None
    return client_state_stores.open_client_states(
        args.client_states,
        template,
        list(args.train_client_data.client_ids),
        checkpoint_dir=checkpoints.directory,
        directory=args.client_states_dir,
        round_num=round_num,
    )

  restored, store = checkpoints.resume(
      initial_state, total_rounds=args.total_rounds, open_store=open_store
  )
  if restored is None:
    store = open_store(None)
  state = initial_state if restored is None else restored.server_state
  round_num = None if restored is None else restored.round_num
  try:
    files = runner.open_files(checkpoints.directory, round_num, state)
  except BaseException:
    if store is not None:
      store.close()
    raise
  steps = checkpoint_steps.combine_steps(store, files)
  if restored is None:
    # A run from round 1 is no fork, whatever a fork killed midway left.
    fork_json = outputs.RunPaths(
        args.output_dir, args.experiment_name
    ).fork_json
    if os.path.exists(fork_json):
      os.remove(fork_json)
    # Nor has it per-client rows (a run killed before version 0 left some).
    per_client = checkpoints.per_client_csv
    if per_client is not None and os.path.exists(per_client):
      os.remove(per_client)
    checkpoints.save(initial_state, 0, steps)
    return _Start(initial_state, store, steps, None)
  message = (
      f'{args.experiment_name}: resuming from the checkpoint of round '
      f'{restored.round_num} (version {restored.version}) in '
      f'{checkpoints.directory}'
  )
  logging.info('%s', message)
  progress.print_line(message)
  return _Start(restored.server_state, store, steps, restored.round_num)


class _Rounds:
  """Runs, records and checkpoints the rounds of one `run_training` call."""

  def __init__(
      self,
      runner: runner_lib.RoundRunner,
      *,
      args: loop_arguments.Arguments,
      store: Optional[client_state_stores.ClientStates],
      steps: Optional[checkpoint_steps.CheckpointSteps],
      checkpoints: checkpoints_lib.Checkpoints,
      run: Callable[[Any], Any],
  ):
    self._runner = runner
    self._args = args
    self._client_ids = list(args.train_client_data.client_ids)
    self._store = store
    self._steps = steps
    self._checkpoints = checkpoints
    paths = outputs.RunPaths(args.output_dir, args.experiment_name)
    self._per_client_csv = checkpoints.per_client_csv
    self._releases = (
        tff.program.CSVFileReleaseManager(
            paths.metrics_csv, key_fieldname=outputs.ROUND_KEY
        ),
        tff.program.TensorBoardReleaseManager(paths.tensorboard),
    )
    self._run = run

  def train(self, state: Any, round_num: int) -> tuple[Any, dict[str, Any]]:
    """Round t: the new state and the row `train/...`, `round_time_seconds`."""
    start = time.monotonic()
    sampled = sampling.sample_clients(
        self._client_ids,
        self._args.clients_per_round,
        self._args.seed,
        round_num,
    )
    datasets = sampling.round_client_data(
        self._args.train_client_data,
        sampled,
        self._args.preprocess_fn,
        seed=self._args.seed,
        round_num=round_num,
        by_id=self._runner.takes_client_ids,
        epochs=(
            None
            if self._args.client_epochs_fn is None
            else self._args.client_epochs_fn(round_num)
        ),
    )
    client_states = None if self._store is None else self._store.get(sampled)
    state, new_client_states, train_metrics = self._runner.run_round(
        state, datasets, client_states
    )
    # The round's input states are no longer needed (RAM: one round's worth).
    del client_states, datasets
    if self._store is not None:
      if new_client_states is None:
        raise ValueError(
            '`runner.run_round` returned no client states, but the runner '
            'has an `initial_client_state()`.'
        )
      self._store.update(sampled, list(new_client_states))
    round_time = time.monotonic() - start
    values = metrics_lib.flatten_scalar_metrics(
        train_metrics, outputs.TRAIN_PREFIX
    )
    values[outputs.ROUND_TIME_KEY] = round_time
    return state, values

  def evaluate_if_due(
      self, state: Any, round_num: int, values: dict[str, Any]
  ) -> None:
    """Adds the eval columns at eval rounds (every k rounds and round T).

    With per-client evaluation, appends the round's per_client_metrics.csv
    rows.
    """
    if (
        round_num % self._args.rounds_per_eval == 0
        or round_num == self._args.total_rounds
    ):
      evaluated, clients = metrics_lib.evaluate_models_and_clients(
          self._runner, state, self._args.evaluate_fn
      )
      values.update(evaluated)
      if clients is not None:
        per_client_csv.append(self._per_client_csv, round_num, clients)

  def release(self, values: dict[str, Any], round_num: int) -> None:
    """Writes the row to metrics.csv and TensorBoard."""
    for manager in self._releases:
      self._run(manager.release(values, round_num))

  def checkpoint_if_due(self, state: Any, round_num: int) -> bool:
    """Checkpoints at every k-th round and round T; whether it did."""
    if (
        round_num % self._args.rounds_per_checkpoint
        and round_num != self._args.total_rounds
    ):
      return False
    self._checkpoints.save(state, round_num, self._steps)
    logging.info(
        '%s: checkpoint of round %d saved in %s',
        self._args.experiment_name,
        round_num,
        self._checkpoints.directory,
    )
    return True


def _train_rounds(
    rounds: _Rounds,
    start: _Start,
    *,
    total_rounds: int,
    experiment_name: str,
    show_window: bool,
) -> None:
  """Rounds after the start up to T; stops if training diverges."""
  state = start.state
  first_round = (start.resumed_from or 0) + 1
  checkpoint_round = start.resumed_from or 0
  printer = progress.ProgressPrinter(
      experiment_name=experiment_name,
      first_round=first_round,
      total_rounds=total_rounds,
      show_window=show_window,
  )
  for round_num in range(first_round, total_rounds + 1):
    iteration_start = time.monotonic()
    state, values = rounds.train(state, round_num)
    rounds.evaluate_if_due(state, round_num, values)
    divergence.check_training_finite(
        values,
        round_num=round_num,
        experiment_name=experiment_name,
        last_checkpoint_round=checkpoint_round,
    )
    rounds.release(values, round_num)
    if rounds.checkpoint_if_due(state, round_num):
      checkpoint_round = round_num
    printer.round_done(
        round_num=round_num,
        round_time=values[outputs.ROUND_TIME_KEY],
        iteration_time=time.monotonic() - iteration_start,
        values=values,
    )


def run_training(
    runner: runner_lib.RoundRunner,
    *,
    train_client_data: tff.simulation.datasets.ClientData,
    preprocess_fn: sampling.PreprocessFn,
    clients_per_round: int,
    total_rounds: int,
    seed: int,
    evaluate_fn: metrics_lib.EvaluateFn,
    rounds_per_eval: int,
    rounds_per_checkpoint: int,
    output_dir: str,
    experiment_name: str,
    summary_last_n: int = 10,
    client_states: str = 'auto',
    client_states_dir: Optional[str] = None,
    client_epochs_fn: Optional[Callable[[int], int]] = None,
) -> dict[str, Any]:
  """Trains for `total_rounds` rounds, resuming from the newest checkpoint.

  Round t = 1..T samples `sample_clients(ids, clients_per_round, seed, t)`,
  runs `runner.run_round` on their preprocessed datasets (and their client
  states, if the runner has any), evaluates `evaluate_fn` on the window and
  the global model every `rounds_per_eval` rounds and at round T, writes a row
  to `metrics.csv` and TensorBoard, and checkpoints every
  `rounds_per_checkpoint` rounds and at round T. A run stopped at any point
  and restarted with the same arguments ends exactly as an uninterrupted one
  (docs/design.md sec. 5).

  Args:
    runner: A `tff_fedwin.training.RoundRunner`.
    train_client_data: The clients' training data.
    preprocess_fn: Maps a client's raw dataset to the batched dataset the
      process consumes; must be deterministic for exact resumption. If it
      takes a `shuffle_seed` keyword (a task's `preprocess_fn` does), each
      client gets `sampling.client_shuffle_seed(seed, t, id)`, a new order
      every round it trains; a runner that `takes_client_ids` then gets
      `sampling.client_keys` in place of the ids.
    clients_per_round: Clients per round, 1..number of clients.
    total_rounds: T >= 1.
    seed: Non-negative sampling seed.
    evaluate_fn: `ModelWeights` (numpy) -> mapping of metric name (no `/`) to
      float, e.g. accuracy and loss on a centralized test set.
    rounds_per_eval: Evaluate every this many rounds (and at round T).
    rounds_per_checkpoint: Checkpoint every this many rounds (and at round T).
    output_dir: Root directory of all experiments.
    experiment_name: This experiment's directory name under `output_dir`.
    summary_last_n: Number of last eval rounds summarized.
    client_states: Where the runner's client states live, one of
      `client_state_stores.KINDS`: 'memory' (RAM; each checkpoint writes all
      of them), 'disk' (files; RAM holds two rounds', a checkpoint writes the
      clients updated since the previous one) or 'auto' (disk above
      `AUTO_DISK_BYTES` of states for the population). Ignored by runners
      without client states.
    client_states_dir: The disk store's directory (default:
      `checkpoints/client_states` of the run).
    client_epochs_fn: Round t -> the clients' local epochs in round t
      (`sampling.epoch_decay_fn`, IMA's epoch decay), passed to
      `preprocess_fn` as `epochs=` (it must `sampling.takes_epochs`); None:
      the preprocessing's own.

  Returns:
    The summary, also written to `summary.json`: `window` and `global` map
    every eval metric to `mean`, `std` (population) and `values` over the last
    `summary_last_n` eval rounds in the CSV up to T (also those before a
    resume); `eval_rounds`, `rounds_in_csv`,
    `total_round_and_eval_time_seconds` (over the CSV rows),
    `wall_time_seconds` (this call), `resumed_from_round` (None for a fresh
    start), `total_rounds`, `summary_last_n`, `experiment_name` and
    `has_window` (False: the `window` entries repeat `global`'s).

  Raises:
    ValueError: If an argument is invalid (the message names it), if the
      newest checkpoint was made with another `seed`, `clients_per_round` or
      number of clients, or is past `total_rounds`, or if `evaluate_fn`
      returns something other than a mapping of scalars.
    FileNotFoundError: If the runner has client states and the newest
      checkpoint's client-state file is missing.
    TrainingDivergedError: If a training or evaluation loss is NaN or inf, or
      the server skipped a non-finite update.
  """
  start_time = time.monotonic()
  args = loop_arguments.check_arguments(
      runner,
      loop_arguments.Arguments(
          train_client_data=train_client_data,
          preprocess_fn=preprocess_fn,
          clients_per_round=clients_per_round,
          total_rounds=total_rounds,
          seed=seed,
          evaluate_fn=evaluate_fn,
          rounds_per_eval=rounds_per_eval,
          rounds_per_checkpoint=rounds_per_checkpoint,
          output_dir=output_dir,
          experiment_name=experiment_name,
          summary_last_n=summary_last_n,
          client_states=client_states,
          client_states_dir=client_states_dir,
          client_epochs_fn=client_epochs_fn,
      ),
  )
  total_rounds = args.total_rounds
  paths = outputs.RunPaths(output_dir, experiment_name)
  os.makedirs(paths.root, exist_ok=True)
  identity = checkpoints_lib.RunIdentity(
      seed=args.seed,
      clients_per_round=args.clients_per_round,
      num_clients=len(train_client_data.client_ids),
  )
  with event_loop() as run:
    checkpoints = checkpoints_lib.Checkpoints(
        paths.checkpoints,
        identity=identity,
        run=run,
        metrics_csv=paths.metrics_csv,
        per_client_csv=(
            paths.per_client_csv
            if metrics_lib.per_client_metrics_of(evaluate_fn)
            else None
        ),
        client_states_dir=args.client_states_dir,
    )
    with disk_full.as_one_line(checkpoints):
      start = _start(runner, checkpoints, args)
    try:
      rounds = _Rounds(
          runner,
          args=args,
          store=start.store,
          steps=start.steps,
          checkpoints=checkpoints,
          run=run,
      )
      with disk_full.as_one_line(checkpoints):
        _train_rounds(
            rounds,
            start,
            total_rounds=total_rounds,
            experiment_name=experiment_name,
            show_window=runner.has_window(start.state),
        )
    finally:
      if start.steps is not None:
        start.steps.close()
  summary = outputs.summarize_csv(
      paths.metrics_csv, last_n=args.summary_last_n, last_round=total_rounds
  )
  summary.update(
      experiment_name=experiment_name,
      total_rounds=total_rounds,
      summary_last_n=args.summary_last_n,
      resumed_from_round=start.resumed_from,
      wall_time_seconds=time.monotonic() - start_time,
      has_window=runner.has_window(start.state),
  )
  with disk_full.as_one_line(None):
    outputs.write_json_atomically(summary, paths.summary_json)
  return summary
