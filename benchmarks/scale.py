"""Scale benchmark: SCAFFOLD on thousands of synthetic clients, via run_training.

Each row trains one configuration through `tff_fedwin.training.run_training`
(the real loop, client-state store and checkpoints) on a fresh local TFF
worker, on a `SyntheticPopulation`, and measures (scripts/benchmark_scale.py):

* s/round: the median of `metrics.csv`'s `round_time_seconds` after the
  warm-up rounds (round 1 traces the computations);
* driver peak RSS: VmHWM of this process, reset at the start of the row
  (`5` written to `/proc/self/clear_refs`); and the peaks of RssAnon (memory
  the driver holds) and RssFile (mapped file pages, e.g. a memory-mapped
  store's rows, which the kernel can drop) sampled every 0.1 s;
* worker peak RSS: VmHWM of the row's worker(s), before they are stopped;
* checkpoints: for the duration of a row `Checkpoints.save` (the loop's
  checkpoint, also of version 0) is wrapped to time each call and count the
  bytes this process dirtied in files (`/proc/self/io` write_bytes, which also
  counts pages written through a memory map) during the call and over its
  interval (the rounds since the previous checkpoint, then the checkpoint);
  the distinct clients updated in the interval come from `sample_clients`.
"""

import contextlib
import csv
import math
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import attrs

from benchmarks import rounds as rounds_lib
from benchmarks import synthetic_population
from tff_fedwin import runtime
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import registry
from tff_fedwin.tasks import emnist
from tff_fedwin.tasks import registry as tasks_registry
from tff_fedwin.tasks import task as task_lib
from tff_fedwin.training import checkpoints as checkpoints_lib
from tff_fedwin.training import loop
from tff_fedwin.training import outputs
from tff_fedwin.training import run_lock
from tff_fedwin.training import sampling

VARIANTS = ('scaffold', 'scaffold_wsm_ima')
MODELS = ('cnn_dropout', 'small')
IMA_WINDOW_SIZE = 5  # IMA's P; its start round is 0.75 T (docs sec. 1.3).
CLIENT_LEARNING_RATE = 0.05
_GB = 2**30


class RowSpec(NamedTuple):
  """One configuration: variant, population, clients per round, store."""

  name: str
  variant: str  # One of VARIANTS.
  num_clients: int
  clients_per_round: int
  client_states: str  # run_training's `client_states`: memory, disk, auto.
  rounds: int
  model: str = 'cnn_dropout'  # One of MODELS.


class CheckpointRecord(NamedTuple):
  round_num: int
  seconds: float
  call_bytes: int  # Written during the `save` call.
  interval_bytes: int  # Since the previous checkpoint's end.
  updated_clients: int  # Distinct clients sampled since the previous one.
  clients_with_state: int  # Distinct clients sampled in rounds 1..t.


class RowResult(NamedTuple):
  spec: RowSpec
  seconds_per_round: float
  driver_peak_gb: float
  driver_anon_peak_gb: float
  driver_file_peak_gb: float
  worker_peak_gb: float
  state_mb: float  # One client's state.
  wall_seconds: float
  loop_other_seconds: float  # Wall time - round times - eval times.
  checkpoints: tuple[CheckpointRecord, ...]


def rounds_for_coverage(
    num_clients: int, clients_per_round: int, coverage: float
) -> int:
  """Rounds after which `coverage` of the clients are expected to have a state.

  A client is not sampled in a round with probability 1 - k/N, so after R
  rounds a fraction 1 - (1 - k/N)^R has a state.
  """
  if clients_per_round >= num_clients:
    return 1
  miss = 1.0 - clients_per_round / num_clients
  return max(1, math.ceil(math.log(1.0 - coverage) / math.log(miss)))


def write_bytes() -> int:
  """Bytes this process caused to be written to storage (/proc/self/io)."""
  with open('/proc/self/io') as f:
    for line in f:
      if line.startswith('write_bytes:'):
        return int(line.split()[1])
  return 0


def _status_kb(pid: Any = 'self') -> dict[str, int]:
  with open(f'/proc/{pid}/status') as f:
    return {
        k: int(v.split()[0])
        for k, v in (line.split(':', 1) for line in f)
        if v.strip().endswith('kB')
    }


def _reset_peak_rss() -> None:
  """Resets this process's VmHWM to its current RSS (Linux >= 4.0)."""
  try:
    with open('/proc/self/clear_refs', 'w') as f:
      f.write('5')
  except OSError:
    pass


class _MemorySampler:
  """Peaks of this process's RssAnon and RssFile, sampled by a thread."""

  def __init__(self, interval: float = 0.1):
    self.peak_kb = {'RssAnon': 0, 'RssFile': 0}
    self._interval = interval
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._sample, daemon=True)

  def _sample(self) -> None:
    while True:
      status = _status_kb()
      for key in self.peak_kb:
        self.peak_kb[key] = max(self.peak_kb[key], status.get(key, 0))
      if self._stop.wait(self._interval):
        return

  def __enter__(self) -> '_MemorySampler':
    self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._stop.set()
    self._thread.join()


@contextlib.contextmanager
def _timed_checkpoints() -> Iterator[list[tuple[int, float, int, int]]]:
  """Wraps `Checkpoints.save`: records (t, seconds, call bytes, bytes after)."""
  records = []
  original = checkpoints_lib.Checkpoints.save

  def save(self, state, round_num, *args, **kwargs):
    before = write_bytes()
    start = time.monotonic()
    try:
      return original(self, state, round_num, *args, **kwargs)
    finally:
      after = write_bytes()
      records.append(
          (int(round_num), time.monotonic() - start, after - before, after)
      )

  checkpoints_lib.Checkpoints.save = save
  try:
    yield records
  finally:
    checkpoints_lib.Checkpoints.save = original


def checkpoint_records(
    raw: Sequence[tuple[int, float, int, int]],
    client_ids: Sequence[str],
    *,
    clients_per_round: int,
    seed: int,
) -> list[CheckpointRecord]:
  """Adds interval bytes and the clients updated since the last checkpoint."""
  records = []
  seen = set()
  previous_round, previous_end = 0, None
  for round_num, seconds, call_bytes, end in raw:
    updated = set()
    for t in range(previous_round + 1, round_num + 1):
      updated.update(
          sampling.sample_clients(client_ids, clients_per_round, seed, t)
      )
    seen |= updated
    interval = call_bytes if previous_end is None else end - previous_end
    records.append(
        CheckpointRecord(
            round_num, seconds, call_bytes, interval, len(updated), len(seen)
        )
    )
    previous_round, previous_end = round_num, end
  return records


def build_task(
    spec: RowSpec, *, examples_per_client: int, batch_size: int, seed: int
) -> tasks_registry.Task:
  """The synthetic population as a task with `spec.model`."""
  population = synthetic_population.SyntheticPopulation(
      spec.num_clients, examples_per_client, seed=seed
  )
  preprocess_fn = task_lib.batching_fn(batch_size, 1, seed)
  element_spec = preprocess_fn(
      population.create_tf_dataset_for_client(population.client_ids[0])
  ).element_spec
  num_classes = synthetic_population.NUM_CLASSES
  if spec.model == 'cnn_dropout':
    keras_fn = lambda: emnist.create_cnn_dropout_model(num_classes, seed)
  else:
    keras_fn = lambda: tasks_registry.create_mnist_cnn(
        synthetic_population.IMAGE_SHAPE, num_classes, seed
    )
  return task_lib.Task(
      f'synthetic_{spec.num_clients}',
      task_lib.classification_model_fn(keras_fn, element_spec),
      population,
      preprocess_fn,
      synthetic_population.synthetic_test_dataset(100, 100, seed),
      num_classes,
  )


def build_runner(
    spec: RowSpec, task: tasks_registry.Task, output_dir: str
) -> Any:
  """SCAFFOLD, or SCAFFOLD + WSM + IMA (window P=5 in broadcast mode).

  The run's own files (the round's client state files) go to
  `output_dir/spec.name`.
  """
  config = config_lib.ExperimentConfig(
      algorithm='scaffold',
      client_learning_rate=CLIENT_LEARNING_RATE,
      total_rounds=spec.rounds,
      root_output_dir=output_dir,
      experiment_name=spec.name,
  )
  if spec.variant == 'scaffold_wsm_ima':
    config = attrs.evolve(
        config,
        client_loss='wsm',
        window_size=IMA_WINDOW_SIZE,
        window_mode='broadcast',
        window_start_round=math.ceil(0.75 * spec.rounds),
    )
  return registry.build_runner(config, task, spec.num_clients)


def _round_times(metrics_csv: str) -> list[tuple[int, float, float]]:
  with open(metrics_csv) as f:
    return [
        (
            int(row[outputs.ROUND_KEY]),
            float(row[outputs.ROUND_TIME_KEY]),
            float(row.get(outputs.EVAL_TIME_KEY) or 0.0),
        )
        for row in csv.DictReader(f)
    ]


def run_row(
    spec: RowSpec,
    *,
    examples_per_client: int,
    batch_size: int,
    rounds_per_checkpoint: int,
    warmup_rounds: int,
    output_dir: str,
    seed: int = 0,
    keep_outputs: bool = False,
) -> RowResult:
  """Trains `spec` from scratch on a fresh worker; returns what it measured.

  The row's directory `output_dir/spec.name` is deleted before (a leftover
  would be resumed) and, unless `keep_outputs`, after the row.
  """
  paths = outputs.RunPaths(output_dir, spec.name)
  task = build_task(
      spec,
      examples_per_client=examples_per_client,
      batch_size=batch_size,
      seed=seed,
  )
  _reset_peak_rss()
  with run_lock.hold(paths.root):
    run_lock.clear_held(paths.root)  # A leftover would be resumed.
    with runtime.local_execution_context(), _MemorySampler() as sampler:
      runner = build_runner(spec, task, output_dir)
      with _timed_checkpoints() as raw:
        summary = loop.run_training(
            runner,
            train_client_data=task.train_data,
            preprocess_fn=task.preprocess_fn,
            clients_per_round=spec.clients_per_round,
            total_rounds=spec.rounds,
            seed=seed,
            evaluate_fn=task.build_evaluate_fn(),
            rounds_per_eval=spec.rounds,
            rounds_per_checkpoint=rounds_per_checkpoint,
            output_dir=output_dir,
            experiment_name=spec.name,
            client_states=spec.client_states,
        )
      worker_gb = max(
          (rounds_lib.peak_gb(w.pid) for w in runtime.running_workers()),
          default=0.0,
      )
  times = _round_times(paths.metrics_csv)
  if not keep_outputs:
    shutil.rmtree(paths.root, ignore_errors=True)
  timed = [s for t, s, _ in times if t > warmup_rounds] or [times[-1][1]]
  return RowResult(
      spec=spec,
      seconds_per_round=statistics.median(timed),
      driver_peak_gb=_status_kb().get('VmHWM', 0) / 2**20,
      driver_anon_peak_gb=sampler.peak_kb['RssAnon'] / 2**20,
      driver_file_peak_gb=sampler.peak_kb['RssFile'] / 2**20,
      worker_peak_gb=worker_gb,
      state_mb=rounds_lib.state_mb(runner.initial_client_state()),
      wall_seconds=summary['wall_time_seconds'],
      loop_other_seconds=summary['wall_time_seconds']
      - sum(s + e for _, s, e in times),
      checkpoints=tuple(
          checkpoint_records(
              raw,
              task.train_data.client_ids,
              clients_per_round=spec.clients_per_round,
              seed=seed,
          )
      ),
  )


def run_rows(
    specs: Sequence[RowSpec],
    log: Callable[[str], None] = print,
    **kwargs,
) -> list[RowResult]:
  """`run_row` of each spec (keyword arguments as `run_row`'s), in order.

  First an unreported warm-up row (the first spec for `warmup_rounds` + 1
  rounds): the driver's first row in a process pays one-time costs (tracing
  of TF's serialization and of the evaluation, caches) that would otherwise
  slow only the first measured row.
  """
  first = specs[0]
  warmup = first._replace(
      name=f'{first.name}_warmup', rounds=kwargs['warmup_rounds'] + 1
  )
  log(f'{warmup.name}: warm-up row, not reported ...')
  run_row(warmup, **kwargs)
  results = []
  for spec in specs:
    log(f'{spec.name}: {spec.rounds} rounds ...')
    result = run_row(spec, **kwargs)
    log(
        f'{spec.name}: {result.seconds_per_round:.3f} s/round, driver peak '
        f'{result.driver_peak_gb:.2f} GB, worker peak '
        f'{result.worker_peak_gb:.2f} GB, wall {result.wall_seconds:.0f} s'
    )
    results.append(result)
  return results
