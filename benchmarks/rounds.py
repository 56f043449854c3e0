"""Round-time benchmarks, measured side by side in one process.

Each row runs on its own fresh TFF worker(s) after one untimed warm-up call,
and is reported against TFF's `build_weighted_fed_avg` measured in the same run
(first and last) and against the bound: the same arithmetic as one in-process
`tf.function` per round over tensors (docs/performance.md sec. 1). Used by
scripts/benchmark.py and scripts/benchmark_window.py.
"""

import collections
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import model_families
from benchmarks import row_order
from benchmarks import stepped
from benchmarks import tensor_rounds
from tff_fedwin import algorithms
from tff_fedwin import runtime
from tff_fedwin.algorithms import scaffold

BOUND_NAME = row_order.BOUND_NAME
# The bounds live in tensor_rounds; the scripts reach them from here.
bound_row = tensor_rounds.bound_row
# run(data, rounds) -> (seconds per round, state MB).
RowFn = Callable[[list[tf.data.Dataset], int], tuple[float, float]]


class Row(NamedTuple):
  name: str
  run: RowFn
  num_workers: int = 1  # 0: no TFF worker (plain TensorFlow).
  # The name of the row's own bound (the same algorithm's arithmetic as one
  # tf.function, `tensor_rounds`), if the table has one.
  own_bound: Optional[str] = None


class Result(NamedTuple):
  name: str
  seconds_per_round: float
  state_mb: float
  worker_peak_gb: float
  own_bound: Optional[str] = None


def emnist_model_fn() -> tff.learning.models.VariableModel:
  """The EMNIST-62 `cnn_dropout` CNN (1.2M parameters) as a TFF model."""
  return model_families.family('cnn').model_fn()


def state_mb(state: Any) -> float:
  return sum(np.asarray(x).nbytes for x in tf.nest.flatten(state)) / 2**20


def peak_gb(pid: int) -> float:
  """Peak resident memory (VmHWM) of process `pid`, in GB."""
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmHWM:'):
        return int(line.split()[1]) / 2**20
  return 0.0


def driver_peak_gb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def learning_process_row(
    build: Callable[[], Any],
    *,
    server_state_files: bool = False,
    client_data_by_id: bool = False,
) -> stepped.SteppedRow:
  """Times rounds of the LearningProcess `build()`, one `next` per round.

  The rounds go through `algorithms.LearningProcessRunner`, as the training
  loop runs them; with `server_state_files` the runner keeps the server
  state in files (a temporary directory), its reading of the new state
  timed too; with `client_data_by_id` the worker builds the clients'
  datasets from a tensor bundle by id (`stepped.client_data_by_id`).
  """

  def rounds(data):
    process = build()
    state = [process.initialize()]
    directory = stepped.temporary_directory(server_state_files, 'server_state_')
    data, computation, bundle = stepped.client_data_by_id(
        data, client_data_by_id
    )
    runner = algorithms.LearningProcessRunner(
        process, server_state_dir=directory, dataset_computation=computation
    )

    def next_round():
      state[0] = runner.run_round(state[0], data)[0]

    return stepped.warmed_up(
        next_round, lambda: state_mb(state[0]), directory, bundle
    )

  return stepped.SteppedRow(rounds)


def multi_round_row(build: Callable[[], Any], rounds_per_call: int) -> RowFn:
  """Times one call of `rounds_per_call` rounds; reports time per round."""

  def run(data, rounds):
    del rounds
    process = algorithms.build_multi_round_process(build(), rounds_per_call)
    calls_data = [tuple([d] * rounds_per_call) for d in data]
    state = process.initialize()
    state = process.next(state, calls_data).state  # Warm-up (tracing).
    start = time.perf_counter()
    state = process.next(state, calls_data).state
    return (time.perf_counter() - start) / rounds_per_call, state_mb(state)

  return run


def scaffold_row(
    model_fn,
    client_learning_rate: float,
    client_state_transfer='values',
    *,
    server_state_files: bool = False,
    client_data_by_id: bool = False,
    algorithm=None,
) -> stepped.SteppedRow:
  """Times SCAFFOLD rounds (or those of another `ClientStateAlgorithm` with
  client states, `algorithm`); state MB includes the sampled clients' states.

  The rounds go through `algorithms.ClientStateRunner`, so with
  `client_state_transfer='files'` (and `server_state_files`) the driver's
  writing and reading of the state files (in temporary directories) is
  timed too; `client_data_by_id` as for `learning_process_row`.
  """

  def rounds(data):
    process = algorithms.build_client_state_process(
        model_fn,
        algorithm or scaffold.Scaffold(),
        client_learning_rate=client_learning_rate,
        total_clients=len(data),
        client_state_transfer=client_state_transfer,
    )
    clients = stepped.temporary_directory(
        client_state_transfer == 'files', 'scaffold_row_'
    )
    server = stepped.temporary_directory(server_state_files, 'server_state_')
    data, computation, bundle = stepped.client_data_by_id(
        data, client_data_by_id
    )
    runner = algorithms.ClientStateRunner(
        process,
        algorithms.client_state.initial_client_state(
            model_fn, algorithm or scaffold.Scaffold()
        ),
        state_files_dir=clients,
        server_state_dir=server,
        dataset_computation=computation,
    )
    held = [runner.initialize(), [runner.initial_client_state()] * len(data)]

    def next_round():
      held[0], held[1], _ = runner.run_round(held[0], data, held[1])

    return stepped.warmed_up(
        next_round,
        lambda: state_mb(held[0]) + state_mb(held[1]),
        clients,
        server,
        bundle,
    )

  return stepped.SteppedRow(rounds)


def plain_tensorflow_row(keras_model_fn, client_learning_rate: float) -> RowFn:
  """The same FedAvg client training as an in-process `tf.data` loop.

  No TFF: one Keras model, SGD steps in a `tf.function` iterating the client's
  `tf.data.Dataset` (`for batch in dataset`, a dataset reduce), one call per
  client, example-weighted mean of the client deltas, server SGD(1.0). Not a
  bound: the dataset loop itself is slow (see `bound_row`).
  """

  def run(data, rounds):
    model = keras_model_fn()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    global_weights = [tf.Variable(w) for w in model.trainable_weights]

    @tf.function
    def client_update(dataset):
      for var, value in zip(model.trainable_weights, global_weights):
        var.assign(value)
      num_examples = tf.constant(0.0)
      for batch in dataset:
        with tf.GradientTape() as tape:
          loss = loss_fn(batch['y'], model(batch['x'], training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        for var, grad in zip(model.trainable_weights, grads):
          var.assign_sub(client_learning_rate * grad)
        num_examples += tf.cast(tf.shape(batch['y'])[0], tf.float32)
      deltas = [g - v for g, v in zip(global_weights, model.trainable_weights)]
      return deltas, num_examples

    def one_round():
      total = [tf.zeros_like(w) for w in global_weights]
      weight = 0.0
      for dataset in data:
        deltas, n = client_update(dataset)
        total = [t + n * d for t, d in zip(total, deltas)]
        weight += float(n)
      for var, t in zip(global_weights, total):
        var.assign_sub(t / weight)

    one_round()  # Warm-up (tracing).
    start = time.perf_counter()
    for _ in range(rounds):
      one_round()
    return (
        (time.perf_counter() - start) / rounds,
        state_mb([w.numpy() for w in global_weights]),
    )

  return run


def run_rows(
    rows: Sequence[Row],
    data: list[tf.data.Dataset],
    rounds: int,
    log: Callable[[str], None] = print,
) -> list[Result]:
  """Runs each row on fresh managed worker(s); returns the measurements."""
  results = []
  for row in rows:
    if row.num_workers == 0:
      seconds, mb = row.run(data, rounds)
      worker_gb = 0.0
    else:
      context = (
          runtime.local_execution_context()
          if row.num_workers == 1
          else runtime.multi_worker_execution_context(
              num_workers=row.num_workers
          )
      )
      with context:
        seconds, mb = row.run(data, rounds)
        worker_gb = max(peak_gb(w.pid) for w in runtime.running_workers())
    results.append(Result(row.name, seconds, mb, worker_gb, row.own_bound))
    log(
        f'{row.name}: {seconds:.2f} s/round, state {mb:.1f} MB, '
        f'worker peak {worker_gb:.2f} GB'
    )
  return results


def _ratios(results: Sequence[Result], baseline_name: str, bound_name: str):
  """Per result: (x TFF, x bound, x own bound or None), one run's references.

  Each reference is the mean of its rows (the baseline is measured first and
  last).
  """
  by_name = collections.defaultdict(list)
  for r in results:
    by_name[r.name].append(r.seconds_per_round)
  missing = {r.own_bound for r in results if r.own_bound} - set(by_name)
  if missing:
    raise ValueError(
        f'Own bound rows {sorted(missing)} are not in the results.'
    )
  mean = lambda name: float(np.mean(by_name[name]))
  baseline, bound = mean(baseline_name), mean(bound_name)
  return [
      (
          r.seconds_per_round / baseline,
          r.seconds_per_round / bound,
          r.seconds_per_round / mean(r.own_bound) if r.own_bound else None,
      )
      for r in results
  ]


def median_and_range(values: Sequence[float]) -> str:
  """`'1.27'` for one value, `'1.27 (1.18-1.30)'` (median, min-max) else."""
  if len(values) == 1:
    return f'{values[0]:.2f}'
  return f'{np.median(values):.2f} ({min(values):.2f}-{max(values):.2f})'


def markdown_table(
    results: Sequence[Result],
    baseline_name: str,
    bound_name: str,
    header: str,
    repeats: Sequence[Sequence[Result]] = (),
) -> str:
  """A table with each row's ratios to TFF's baseline and to the bound.

  Each reference is the mean of its rows (the baseline is measured first and
  last). A row with an `own_bound` also gets its ratio to that row (the same
  algorithm's bound), blank otherwise. With `repeats` (further runs of the
  same rows, in the same order), every cell is the median over the runs
  with their range: s/round over the runs' times, each ratio over the
  ratios computed within each run.
  """
  runs = [results, *repeats]
  ratios = [_ratios(run, baseline_name, bound_name) for run in runs]
  lines = [
      header,
      '',
      '| process | s/round | x TFF | x bound | x own bound | state MB | '
      'worker peak GB |',
      '|---|---:|---:|---:|---:|---:|---:|',
  ]
  for i, r in enumerate(results):
    cells = [[run[i].seconds_per_round for run in runs]]
    cells += [[ratio[i][k] for ratio in ratios] for k in range(3)]
    text = [median_and_range(c) if c[0] is not None else '' for c in cells]
    lines.append(
        f'| {r.name} | {" | ".join(text)} | '
        f'{max(run[i].state_mb for run in runs):.1f} | '
        f'{max(run[i].worker_peak_gb for run in runs):.2f} |'
    )
  lines.append('')
  lines.append(f'Driver (Python) peak RSS: {driver_peak_gb():.2f} GB.')
  return '\n'.join(lines)


def run_and_report(
    rows: Sequence[Row],
    *,
    baseline_name: str,
    bound_name: str,
    rounds: int,
    clients: int,
    steps: int,
    batch_size: int,
    output: Optional[str] = None,
    repeats: int = 1,
    family: str = 'cnn',
) -> str:
  """Runs `rows` on synthetic clients; prints and returns the table.

  `family`: the model family the clients' data are for
  (`model_families.NAMES`; the rows must train its model).

  With `repeats` > 1 the whole list of rows runs that many times, one list
  after the other, every other list backward (`row_order.run_order`), and
  the table gives medians and ranges (`markdown_table`).
  """
  if rounds < 1:
    raise ValueError(f'`rounds` must be >= 1, got {rounds}.')
  if repeats < 1:
    raise ValueError(f'`repeats` must be >= 1, got {repeats}.')
  model = model_families.family(family)
  data = model.client_data(clients, steps, batch_size)
  runs = [_run_in_order(rows, data, rounds, i) for i in range(repeats)]
  repeated = (
      f' The whole list ran {repeats} times, every other time in reverse '
      'order; each cell is the median over the runs (min-max), ratios taken '
      'within each run.'
      if repeats > 1
      else ''
  )
  table = markdown_table(
      runs[0],
      baseline_name,
      bound_name,
      f'{model.description}; {clients} clients x {steps} '
      f'steps of batch {batch_size}; {rounds} timed rounds per row after one '
      f'warm-up call; each row on fresh TFF worker(s).{repeated}',
      repeats=runs[1:],
  )
  print(table, flush=True)
  if output:
    with open(output, 'w') as f:
      f.write(table + '\n')
  return table


def _run_in_order(rows, data, rounds, repeat):
  """`run_rows` in `row_order.run_order`; the results in `rows`' order."""
  order = row_order.run_order(len(rows), repeat)
  measured = run_rows([rows[i] for i in order], data, rounds)
  results = [None] * len(rows)
  for position, index in enumerate(order):
    results[index] = measured[position]
  return results


def fed_avg_baseline(
    client_learning_rate: float, model_fn=emnist_model_fn
) -> Callable[[], Any]:
  """TFF's own `build_weighted_fed_avg`: the baseline of every table."""
  return lambda: tff.learning.algorithms.build_weighted_fed_avg(
      model_fn, tff.learning.optimizers.build_sgdm(client_learning_rate)
  )
