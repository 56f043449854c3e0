"""The experiments' round loop: sampling, eval, checkpoints and metrics.

`run_training` drives any federated process through a small runner adapter:

* `LearningProcessRunner` for a `tff.learning.templates.LearningProcess`
  (`tff_fedwin.algorithms.build_fed_win`, TFF's own builders, with or without a
  `WindowedModelAveragingFactory`);
* `ScaffoldRunner` for `tff_fedwin.algorithms.build_scaffold`, a
  `tff.templates.IterativeProcess` whose `next` takes and returns the sampled
  clients' states, kept in a `tff_fedwin.training.ClientStateStore`.

Every round t = 1..T it samples clients without replacement from an RNG seeded
by `(seed, t)` alone, runs the round, evaluates the window model and the plain
global model every `rounds_per_eval` rounds and at the last round, releases the
metrics to a CSV file and to TensorBoard (`tff.program` release managers), and
checkpoints with `tff.program.FileProgramStateManager` every
`rounds_per_checkpoint` rounds and at the end (DESIGN.md sec. 4: the tff.program
managers work with TFF 0.87, `tff.simulation.run_training_process` cannot drive
a process that returns client states).

Files under `output_dir/experiment_name/`:

  checkpoints/program_state_<t>/    server state, round number, sampling args
  checkpoints/client_states_<t>.npz the ClientStateStore of round t (SCAFFOLD)
  metrics.csv                       one row per round, key column `round_num`
  tensorboard/                      the same values as TensorBoard scalars
  summary.json                      the dict `run_training` returns

Resuming. A run that dies at any point and is restarted with the same arguments
ends with exactly the same server state and client states as an uninterrupted
run: it restarts from the newest program state, whose round's client-state file
was written (atomically) before it, re-runs the rounds after it, and the CSV
release manager drops the rows of those rounds before rewriting them. The
sampling RNG needs no state of its own: round t's clients depend only on
`(seed, t)`. The initial state is checkpointed as version 0, so a random model
initialization is reused too. Exactness also needs a deterministic
`preprocess_fn` (e.g. `shuffle(..., seed=...)`) and `evaluate_fn` without side
effects on training. TensorBoard gets the re-run rounds a second time (it shows
the newest event of a step).
"""

import asyncio
import collections
import csv
import datetime
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Protocol

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window as window_lib
from tff_fedwin.algorithms import scaffold as scaffold_lib
from tff_fedwin.training import client_states as client_states_lib
from tff_fedwin.training import divergence

ModelWeights = tff.learning.models.ModelWeights
EvaluateFn = Callable[[ModelWeights], Mapping[str, float]]
PreprocessFn = Callable[[tf.data.Dataset], tf.data.Dataset]

CHECKPOINT_DIR = 'checkpoints'
METRICS_CSV = 'metrics.csv'
TENSORBOARD_DIR = 'tensorboard'
SUMMARY_JSON = 'summary.json'
ROUND_KEY = 'round_num'
ROUND_TIME_KEY = 'round_time_seconds'
EVAL_TIME_KEY = 'eval_time_seconds'
TRAIN_PREFIX = 'train'
WINDOW_PREFIX = 'window'
GLOBAL_PREFIX = 'global'
# Program states kept on disk (tff.program.FileProgramStateManager keeps the
# first one, version 0, as well).
CHECKPOINTS_TO_KEEP = 5
# Rounds without an eval print a progress line at most this often.
PROGRESS_INTERVAL_SECONDS = 30.0
_CLIENT_STATES_PATTERN = re.compile(r'^client_states_(\d+)\.npz$')


class RoundRunner(Protocol):
  """What `run_training` needs from a process adapter.

  `client_state_store` is `None` for processes without client states; a runner
  with a store also needs `set_client_state_store(store)` (used on resume).
  """

  client_state_store: Optional[client_states_lib.ClientStateStore]

  def initialize(self) -> Any:
    ...

  def run_round(
      self, state: Any, client_ids: Sequence[str],
      datasets: Sequence[tf.data.Dataset]) -> tuple[Any, Any]:
    ...

  def global_model_weights(self, state: Any) -> ModelWeights:
    ...

  def window_model_weights(self, state: Any) -> ModelWeights:
    ...


def _holds_window(state: Any) -> bool:
  """Whether a process state has a window nested anywhere in it."""
  return bool(window_lib.find_window_states(
      state, (window_lib.WindowAggregatorState, window_lib.WindowBuffer)))


class LearningProcessRunner:
  """Runs a `tff.learning.templates.LearningProcess` one round at a time.

  The window model is `tff_fedwin.aggregators.window_model_weights(state)`
  (numpy, no TFF call) when the state holds a window (`build_fed_win` with
  `window_size`, or a `WindowedModelAveragingFactory` aggregator), else the
  global model.
  """

  def __init__(self, process: tff.learning.templates.LearningProcess):
    """Initializes the runner.

    Args:
      process: A `tff.learning.templates.LearningProcess`.

    Raises:
      ValueError: If `process` is not a `LearningProcess`.
    """
    if not isinstance(process, tff.learning.templates.LearningProcess):
      raise ValueError(
          '`process` must be a tff.learning.templates.LearningProcess, got '
          f'{type(process).__name__}; use ScaffoldRunner for SCAFFOLD.')
    self._process = process

  @property
  def process(self) -> tff.learning.templates.LearningProcess:
    return self._process

  @property
  def client_state_store(self) -> None:
    """Always `None`: a `LearningProcess` keeps no client states."""
    return None

  def initialize(self) -> Any:
    """The process's initial server state."""
    return self._process.initialize()

  def run_round(
      self, state: Any, client_ids: Sequence[str],
      datasets: Sequence[tf.data.Dataset]) -> tuple[Any, Any]:
    """One `process.next`; returns `(state, metrics)`.

    Args:
      state: The server state.
      client_ids: The sampled client ids (unused: the process is stateless on
        the clients).
      datasets: The sampled clients' datasets, in the order of `client_ids`.
    """
    del client_ids  # Unused.
    output = self._process.next(state, list(datasets))
    return output.state, output.metrics

  def global_model_weights(self, state: Any) -> ModelWeights:
    """The plain global model w^t, `state.global_model_weights`."""
    return state.global_model_weights

  def window_model_weights(self, state: Any) -> ModelWeights:
    """The window model m^t if the state holds a window, else w^t."""
    if _holds_window(state):
      return window_lib.window_model_weights(state)
    return state.global_model_weights


class ScaffoldRunner:
  """Runs `tff_fedwin.algorithms.build_scaffold` with a client-state store.

  `run_round` reads the sampled clients' states from the store, calls
  `process.next(state, datasets, client_states)` and writes the returned
  states back. `run_training` replaces the store by the checkpointed one when
  it resumes (`set_client_state_store`): read it from `client_state_store`.
  """

  def __init__(
      self,
      process: tff.templates.IterativeProcess,
      client_state_store: client_states_lib.ClientStateStore,
  ):
    """Initializes the runner.

    Args:
      process: The `tff.templates.IterativeProcess` of `build_scaffold`.
      client_state_store: The clients' states, e.g. `ClientStateStore(
        tff_fedwin.algorithms.initial_client_state(model_fn))`.

    Raises:
      ValueError: If an argument has the wrong type.
    """
    if not isinstance(process, tff.templates.IterativeProcess) or isinstance(
        process, tff.learning.templates.LearningProcess):
      raise ValueError(
          '`process` must be the tff.templates.IterativeProcess of '
          f'build_scaffold, got {type(process).__name__}.')
    self._process = process
    self.set_client_state_store(client_state_store)

  @property
  def process(self) -> tff.templates.IterativeProcess:
    return self._process

  @property
  def client_state_store(self) -> client_states_lib.ClientStateStore:
    """The store of every client's state (replaced on resume)."""
    return self._store

  def set_client_state_store(
      self, store: client_states_lib.ClientStateStore) -> None:
    """Replaces the client-state store (used when restoring a checkpoint)."""
    if not isinstance(store, client_states_lib.ClientStateStore):
      raise ValueError(
          '`client_state_store` must be a tff_fedwin.training.ClientStateStore'
          f', got {type(store).__name__}.')
    self._store = store

  def initialize(self) -> Any:
    """The process's initial server state."""
    return self._process.initialize()

  def run_round(
      self, state: Any, client_ids: Sequence[str],
      datasets: Sequence[tf.data.Dataset]) -> tuple[Any, Any]:
    """One SCAFFOLD round; updates the store; returns `(state, metrics)`.

    Args:
      state: The `ScaffoldServerState`.
      client_ids: The sampled, distinct client ids.
      datasets: Their datasets, in the order of `client_ids`.
    """
    client_ids = list(client_ids)
    state, new_client_states, metrics = self._process.next(
        state, list(datasets), self._store.get(client_ids))
    self._store.update(client_ids, list(new_client_states))
    return state, metrics

  def global_model_weights(self, state: Any) -> ModelWeights:
    """The plain global model x, `state.global_model_weights`."""
    return state.global_model_weights

  def window_model_weights(self, state: Any) -> ModelWeights:
    """The window model if the state holds a window, else the global model."""
    if _holds_window(state):
      return window_lib.window_model_weights(state)
    return scaffold_lib.get_model_weights(state)


def sample_clients(
    client_ids: Sequence[str], clients_per_round: int, seed: int,
    round_num: int) -> list[str]:
  """The clients of round `round_num`: without replacement, from `(seed, t)`.

  `np.random.default_rng([seed, round_num]).choice(len(client_ids),
  clients_per_round, replace=False)` indexes `client_ids`. Every round's RNG is
  made from the seed and the round number alone, so a resumed run samples the
  same clients as an uninterrupted one without saving any RNG state.

  Args:
    client_ids: All client ids, in a fixed order (`ClientData.client_ids`).
    clients_per_round: 1 <= clients_per_round <= len(client_ids).
    seed: A non-negative int.
    round_num: The round, t >= 1.

  Returns:
    `clients_per_round` distinct ids.
  """
  rng = np.random.default_rng([seed, round_num])
  indices = rng.choice(len(client_ids), size=clients_per_round, replace=False)
  return [client_ids[i] for i in indices]


def flatten_scalar_metrics(
    metrics: Any, prefix: str = '') -> 'collections.OrderedDict[str, Any]':
  """The numeric scalars of a nested metrics structure, keyed `a/b/c`.

  Mappings, named tuples, lists and tuples are walked (sequence positions
  become path components); non-numeric or non-scalar leaves are dropped; bools
  become ints.

  Args:
    metrics: A nested structure, e.g. the metrics of `process.next`.
    prefix: Prepended to every key as `prefix/...` (if non-empty).

  Returns:
    An `OrderedDict` of Python ints and floats.
  """
  flat = collections.OrderedDict()

  def walk(value, path):
    if isinstance(value, Mapping):
      items = value.items()
    elif isinstance(value, tuple) and hasattr(value, '_asdict'):
      items = value._asdict().items()
    elif isinstance(value, (list, tuple)):
      items = enumerate(value)
    else:
      array = np.asarray(value)
      if array.ndim == 0 and array.dtype.kind in 'biuf':
        key = '/'.join(path)
        flat[key] = (float(array) if array.dtype.kind == 'f'
                     else int(array))
      return
    for name, child in items:
      walk(child, path + [str(name)])

  walk(metrics, [prefix] if prefix else [])
  return flat


class _Paths:
  """The files of one experiment under `output_dir/experiment_name`."""

  def __init__(self, output_dir: str, experiment_name: str):
    self.root = os.path.join(os.fspath(output_dir), experiment_name)
    self.checkpoints = os.path.join(self.root, CHECKPOINT_DIR)
    self.metrics_csv = os.path.join(self.root, METRICS_CSV)
    self.tensorboard = os.path.join(self.root, TENSORBOARD_DIR)
    self.summary_json = os.path.join(self.root, SUMMARY_JSON)

  def client_states(self, round_num: int) -> str:
    return os.path.join(self.checkpoints, f'client_states_{round_num}.npz')


def _check_int(name: str, value: Any, minimum: int) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(
        f'`{name}` must be an int >= {minimum}, got {value!r} of type '
        f'{type(value).__name__}.')
  if value < minimum:
    raise ValueError(f'`{name}` must be an int >= {minimum}, got {value}.')
  return int(value)


def is_directory_name(name: Any) -> bool:
  """Whether `name` is one non-empty directory name (no path separators)."""
  return (isinstance(name, str) and bool(name) and name not in ('.', '..')
          and os.sep not in name
          and not (os.altsep and os.altsep in name))


def _validate_arguments(
    runner, train_client_data, preprocess_fn, clients_per_round, total_rounds,
    seed, evaluate_fn, rounds_per_eval, rounds_per_checkpoint, output_dir,
    experiment_name, summary_last_n) -> list[str]:
  """Raises ValueError naming the first bad argument; returns the client ids."""
  for method in ('initialize', 'run_round', 'global_model_weights',
                 'window_model_weights'):
    if not callable(getattr(runner, method, None)):
      raise ValueError(
          f'`runner` must have a `{method}` method (a LearningProcessRunner or '
          f'ScaffoldRunner), got {type(runner).__name__}.')
  if getattr(runner, 'client_state_store', None) is not None and not callable(
      getattr(runner, 'set_client_state_store', None)):
    raise ValueError(
        '`runner` has a `client_state_store` but no `set_client_state_store` '
        'method to restore it on resume.')
  if not isinstance(train_client_data, tff.simulation.datasets.ClientData):
    raise ValueError(
        '`train_client_data` must be a tff.simulation.datasets.ClientData, got '
        f'{type(train_client_data).__name__}.')
  client_ids = list(train_client_data.client_ids)
  if not callable(preprocess_fn):
    raise ValueError('`preprocess_fn` must be callable.')
  if not callable(evaluate_fn):
    raise ValueError('`evaluate_fn` must be callable.')
  clients_per_round = _check_int('clients_per_round', clients_per_round, 1)
  if clients_per_round > len(client_ids):
    raise ValueError(
        f'`clients_per_round` ({clients_per_round}) exceeds the number of '
        f'clients in `train_client_data` ({len(client_ids)}).')
  _check_int('total_rounds', total_rounds, 1)
  _check_int('seed', seed, 0)
  _check_int('rounds_per_eval', rounds_per_eval, 1)
  _check_int('rounds_per_checkpoint', rounds_per_checkpoint, 1)
  _check_int('summary_last_n', summary_last_n, 1)
  if not isinstance(output_dir, (str, os.PathLike)) or not os.fspath(
      output_dir):
    raise ValueError(
        f'`output_dir` must be a non-empty path, got {output_dir!r}.')
  if not is_directory_name(experiment_name):
    raise ValueError(
        '`experiment_name` must be a non-empty directory name without path '
        f'separators, got {experiment_name!r}.')
  return client_ids


def _check_eval_metrics(metrics: Any) -> 'collections.OrderedDict[str, float]':
  if not isinstance(metrics, Mapping) or not metrics:
    raise ValueError(
        '`evaluate_fn` must return a non-empty mapping of metric names to '
        f'floats, got {metrics!r}.')
  checked = collections.OrderedDict()
  for name, value in metrics.items():
    if not isinstance(name, str) or not name or '/' in name:
      raise ValueError(
          '`evaluate_fn` must return str metric names without "/", got '
          f'{name!r}.')
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in 'biuf':
      raise ValueError(
          f'`evaluate_fn` returned a non-scalar metric {name!r}: {value!r}.')
    checked[name] = float(array)
  return checked


def _same_weights(a: ModelWeights, b: ModelWeights) -> bool:
  leaves_a = tf.nest.flatten((a.trainable, a.non_trainable))
  leaves_b = tf.nest.flatten((b.trainable, b.non_trainable))
  return len(leaves_a) == len(leaves_b) and all(
      np.array_equal(np.asarray(x), np.asarray(y))
      for x, y in zip(leaves_a, leaves_b))


def _program_state(state, round_num, seed, clients_per_round, num_clients):
  return collections.OrderedDict(
      server_state=state,
      round_num=np.int64(round_num),
      seed=np.int64(seed),
      clients_per_round=np.int64(clients_per_round),
      num_clients=np.int64(num_clients),
  )


def _write_json_atomically(value: Any, path: str) -> None:
  def write(f):
    json.dump(value, f, indent=2, sort_keys=True)
    f.write('\n')
  client_states_lib.atomic_write(path, write, binary=False)


def _format_seconds(seconds: float) -> str:
  return str(datetime.timedelta(seconds=round(seconds)))


def _progress(message: str) -> None:
  print(message, flush=True)


def _float_or_none(text: Optional[str]) -> Optional[float]:
  if text is None or text == '':
    return None
  return float(text)


def _summarize_csv(
    csv_path: str, last_n: int, last_round: int) -> dict[str, Any]:
  """Mean and std of every eval metric over the last `last_n` eval rounds.

  Rows after `last_round` (left by a longer run that died) are ignored.
  """
  rows = []
  if os.path.exists(csv_path):
    with open(csv_path, newline='') as f:
      rows = [row for row in csv.DictReader(f)
              if int(row[ROUND_KEY]) <= last_round]
  rows.sort(key=lambda row: int(row[ROUND_KEY]))
  eval_rows = [
      row for row in rows
      if any(key.startswith(WINDOW_PREFIX + '/') and value not in (None, '')
             for key, value in row.items())
  ][-last_n:]
  summary = collections.OrderedDict()
  for prefix in (WINDOW_PREFIX, GLOBAL_PREFIX):
    per_metric = collections.OrderedDict()
    names = sorted({key[len(prefix) + 1:] for row in eval_rows for key in row
                    if key.startswith(prefix + '/')})
    for name in names:
      values = np.array(
          [float(row[f'{prefix}/{name}']) for row in eval_rows], np.float64)
      per_metric[name] = collections.OrderedDict(
          mean=float(np.mean(values)),
          std=float(np.std(values)),
          values=values.tolist(),
      )
    summary[prefix] = per_metric
  summary['eval_rounds'] = [int(row[ROUND_KEY]) for row in eval_rows]
  summary['rounds_in_csv'] = len(rows)
  summary['total_round_and_eval_time_seconds'] = float(sum(
      _float_or_none(row.get(key)) or 0.0
      for row in rows for key in (ROUND_TIME_KEY, EVAL_TIME_KEY)))
  return summary


def _remove_stale_client_states(paths: _Paths, keep: Sequence[int]) -> None:
  keep = set(keep)
  for entry in os.listdir(paths.checkpoints):
    match = _CLIENT_STATES_PATTERN.match(entry)
    if match and int(match.group(1)) not in keep:
      os.remove(os.path.join(paths.checkpoints, entry))


def _check_checkpoint(
    loaded: Mapping[str, Any], paths: _Paths, *, seed: int,
    clients_per_round: int, num_clients: int, total_rounds: int) -> int:
  """Raises ValueError unless the checkpoint fits the arguments; its round."""
  for key, argument, value in (
      ('seed', 'seed', seed),
      ('clients_per_round', 'clients_per_round', clients_per_round),
      ('num_clients', 'train_client_data', num_clients),
  ):
    if int(loaded[key]) != value:
      raise ValueError(
          f'`{argument}` differs from the checkpoint in {paths.checkpoints}: '
          f'{key} is {value} now and {int(loaded[key])} there; resume with '
          'the same arguments or use another `experiment_name`.')
  round_num = int(loaded['round_num'])
  if round_num > total_rounds:
    raise ValueError(
        f'`total_rounds` ({total_rounds}) is smaller than the round of the '
        f'newest checkpoint in {paths.checkpoints} ({round_num}).')
  return round_num


def _evaluate(
    runner: RoundRunner, state: Any, evaluate_fn: EvaluateFn,
) -> tuple['collections.OrderedDict[str, float]', str]:
  """`window/<m>`, `global/<m>` and the eval time; a text for the progress line.

  `evaluate_fn` runs once when the window model equals the global model.
  """
  start = time.monotonic()
  window_weights = runner.window_model_weights(state)
  global_weights = runner.global_model_weights(state)
  window_metrics = _check_eval_metrics(evaluate_fn(window_weights))
  if _same_weights(window_weights, global_weights):
    global_metrics = window_metrics
  else:
    global_metrics = _check_eval_metrics(evaluate_fn(global_weights))
  values = collections.OrderedDict()
  for prefix, metrics in ((WINDOW_PREFIX, window_metrics),
                          (GLOBAL_PREFIX, global_metrics)):
    for name, value in metrics.items():
      values[f'{prefix}/{name}'] = value
  text = ', ' + ', '.join(f'{k} {v:.4f}' for k, v in values.items())
  values[EVAL_TIME_KEY] = time.monotonic() - start
  return values, text


def run_training(
    runner: RoundRunner,
    *,
    train_client_data: tff.simulation.datasets.ClientData,
    preprocess_fn: PreprocessFn,
    clients_per_round: int,
    total_rounds: int,
    seed: int,
    evaluate_fn: EvaluateFn,
    rounds_per_eval: int,
    rounds_per_checkpoint: int,
    output_dir: str,
    experiment_name: str,
    summary_last_n: int = 10,
) -> dict[str, Any]:
  """Trains for `total_rounds` rounds, resuming from the newest checkpoint.

  Round t = 1..T:
  1. sample `clients_per_round` distinct clients with `sample_clients(ids,
     clients_per_round, seed, t)` (the RNG of round t is rebuilt from
     `(seed, t)`, which is how the sampling RNG is restored on resume), and
     build their datasets with
     `preprocess_fn(train_client_data.create_tf_dataset_for_client(id))`;
  2. `runner.run_round` (for SCAFFOLD this also updates the client states);
  3. at eval rounds (t % rounds_per_eval == 0, and t == T) evaluate
     `evaluate_fn` on `runner.window_model_weights(state)` and on
     `runner.global_model_weights(state)` (called once when both are equal);
  4. release one row to `metrics.csv` and TensorBoard with key t:
     `train/<path>` for every numeric scalar of the round's metrics,
     `round_time_seconds`, and at eval rounds `window/<metric>`,
     `global/<metric>` and `eval_time_seconds`;
  5. at checkpoint rounds (t % rounds_per_checkpoint == 0, and t == T) save
     the client-state store (if the runner has one) atomically to
     `checkpoints/client_states_<t>.npz`, then the program state (server
     state, t, seed, clients_per_round, number of clients) as version t. The
     store of a version is thus always on disk before the version itself.

  It prints a progress line (round, time, ETA, eval metrics) to stdout for
  the first round, every eval round, and otherwise at most every
  `PROGRESS_INTERVAL_SECONDS`. On start
  it resumes from the newest program state if there is one (and says so),
  otherwise it initializes and saves the initial state as version 0. A run
  stopped at any point and restarted with the same arguments ends exactly as
  an uninterrupted run (see the module docstring for the conditions). A round
  whose training or evaluation loss is NaN or infinite, or whose server update
  was skipped as non-finite, stops the run before it is recorded or
  checkpointed (`TrainingDivergedError`).

  Args:
    runner: A `LearningProcessRunner`, `ScaffoldRunner` or another
      `RoundRunner`.
    train_client_data: The clients' training data.
    preprocess_fn: Maps a client's raw dataset to the batched dataset the
      process consumes; must be deterministic for exact resumption.
    clients_per_round: Clients per round, 1..number of clients.
    total_rounds: T >= 1.
    seed: Non-negative sampling seed.
    evaluate_fn: `ModelWeights` (numpy) -> mapping of metric name (no `/`) to
      float, e.g. accuracy and loss on a centralized test set.
    rounds_per_eval: Evaluate every this many rounds (and at round T).
    rounds_per_checkpoint: Checkpoint every this many rounds (and at round T).
    output_dir: Root directory of all experiments.
    experiment_name: This experiment's directory name under `output_dir`.
    summary_last_n: Number of last eval rounds summarized (the papers report
      the mean accuracy over the last rounds).

  Returns:
    The summary, also written to `summary.json` next to `metrics.csv`:
    `window` and `global` each map every eval metric to `mean` and `std`
    (population std, ddof=0: the round-to-round spread, i.e. smoothness) over
    the last `summary_last_n` eval rounds in the CSV up to `total_rounds`
    (all rounds of the run, also those before a resume), and their `values`;
    `eval_rounds`, `rounds_in_csv`, `total_round_and_eval_time_seconds` (summed
    over the CSV rows, so across restarts), `wall_time_seconds` (this call),
    `resumed_from_round` (None for a fresh start), `total_rounds`,
    `summary_last_n` and `experiment_name`.

  Raises:
    ValueError: If an argument is invalid (the message names it), if the
      newest checkpoint was made with another `seed`, `clients_per_round` or
      number of clients, or is past `total_rounds`, or if `evaluate_fn`
      returns something other than a mapping of scalars.
    FileNotFoundError: If the runner has a client-state store and the newest
      checkpoint's store file is missing.
    TrainingDivergedError: If a training or evaluation loss is NaN or inf, or
      the server skipped a non-finite update.
  """
  start_time = time.monotonic()
  client_ids = _validate_arguments(
      runner, train_client_data, preprocess_fn, clients_per_round,
      total_rounds, seed, evaluate_fn, rounds_per_eval, rounds_per_checkpoint,
      output_dir, experiment_name, summary_last_n)
  clients_per_round = int(clients_per_round)
  total_rounds = int(total_rounds)
  seed = int(seed)
  paths = _Paths(output_dir, experiment_name)
  os.makedirs(paths.root, exist_ok=True)
  state_manager = tff.program.FileProgramStateManager(
      paths.checkpoints, keep_total=CHECKPOINTS_TO_KEEP)
  csv_manager = tff.program.CSVFileReleaseManager(
      paths.metrics_csv, key_fieldname=ROUND_KEY)
  tensorboard_manager = tff.program.TensorBoardReleaseManager(
      paths.tensorboard)
  # The tff.program managers' methods are coroutines (TFF 0.87).
  event_loop = asyncio.new_event_loop()
  run = event_loop.run_until_complete
  has_client_states = getattr(runner, 'client_state_store', None) is not None

  def save_checkpoint(state, round_num):
    if has_client_states:
      runner.client_state_store.save(paths.client_states(round_num))
    run(state_manager.save(
        _program_state(state, round_num, seed, clients_per_round,
                       len(client_ids)), round_num))
    if has_client_states:
      _remove_stale_client_states(
          paths, run(state_manager.get_versions()) or [])
    logging.info('%s: checkpoint of round %d saved in %s', experiment_name,
                 round_num, paths.checkpoints)

  try:
    initial_state = runner.initialize()
    structure = _program_state(initial_state, 0, 0, 0, 0)
    loaded, version = run(state_manager.load_latest(structure))
    if loaded is None:
      state, first_round, resumed_from = initial_state, 1, None
      save_checkpoint(state, 0)
      checkpoint_round = 0
    else:
      resumed_from = _check_checkpoint(
          loaded, paths, seed=seed, clients_per_round=clients_per_round,
          num_clients=len(client_ids), total_rounds=total_rounds)
      if has_client_states:
        store_path = paths.client_states(resumed_from)
        if not os.path.exists(store_path):
          raise FileNotFoundError(
              f'The client states of the checkpoint of round {resumed_from} '
              f'are missing: {store_path}.')
        runner.set_client_state_store(
            client_states_lib.ClientStateStore.load(
                store_path, runner.client_state_store.template))
      state, first_round = loaded['server_state'], resumed_from + 1
      checkpoint_round = resumed_from
      message = (f'{experiment_name}: resuming from the checkpoint of round '
                 f'{resumed_from} (version {version}) in {paths.checkpoints}')
      logging.info('%s', message)
      _progress(message)

    iteration_times = []
    last_progress = -math.inf
    for round_num in range(first_round, total_rounds + 1):
      iteration_start = time.monotonic()
      sampled = sample_clients(client_ids, clients_per_round, seed, round_num)
      datasets = [
          preprocess_fn(train_client_data.create_tf_dataset_for_client(c))
          for c in sampled
      ]
      state, train_metrics = runner.run_round(state, sampled, datasets)
      round_time = time.monotonic() - iteration_start
      values = flatten_scalar_metrics(train_metrics, TRAIN_PREFIX)
      values[ROUND_TIME_KEY] = round_time
      eval_line = ''
      if round_num % rounds_per_eval == 0 or round_num == total_rounds:
        eval_values, eval_line = _evaluate(runner, state, evaluate_fn)
        values.update(eval_values)
      divergence.check_training_finite(
          values, round_num=round_num, experiment_name=experiment_name,
          last_checkpoint_round=checkpoint_round)
      run(csv_manager.release(values, round_num))
      run(tensorboard_manager.release(values, round_num))
      if (round_num % rounds_per_checkpoint == 0
          or round_num == total_rounds):
        save_checkpoint(state, round_num)
        checkpoint_round = round_num
      iteration_times.append(time.monotonic() - iteration_start)
      eta = np.mean(iteration_times) * (total_rounds - round_num)
      if eval_line or round_num == first_round or (
          time.monotonic() - last_progress >= PROGRESS_INTERVAL_SECONDS):
        _progress(
            f'{experiment_name}: round {round_num}/{total_rounds} '
            f'{round_time:.2f}s, ETA {_format_seconds(eta)}{eval_line}')
        last_progress = time.monotonic()
  finally:
    event_loop.run_until_complete(event_loop.shutdown_default_executor())
    event_loop.close()

  summary = _summarize_csv(paths.metrics_csv, summary_last_n, total_rounds)
  summary.update(
      experiment_name=experiment_name,
      total_rounds=total_rounds,
      summary_last_n=summary_last_n,
      resumed_from_round=resumed_from,
      wall_time_seconds=time.monotonic() - start_time,
  )
  _write_json_atomically(summary, paths.summary_json)
  return summary
