r"""Benchmark: round time and state size of FedAvg vs FedAvg + window vs SCAFFOLD.

Every row runs on a fresh managed TFF worker (so the worker's peak memory is
per row) with the same model (the EMNIST-62 `cnn_dropout` CNN, 1.2M
parameters), the same synthetic clients and the same seeds. The baseline, TFF's
own `build_weighted_fed_avg` called once per round, is measured first and
last; ratios are against the mean of those two runs. One warm-up call (tracing)
is not timed. Rows "E rounds per call" run E rounds inside one TFF call
(`tff_fedwin.algorithms.build_multi_round_process`), so the state crosses the
Python boundary once per E rounds; their time is per round.

  .venv/bin/python scripts/benchmark_window.py --rounds=3 --output=bench.md
"""

import resource
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import aggregators
from tff_fedwin import algorithms
from tff_fedwin import runtime
from tff_fedwin import tasks
from tff_fedwin.algorithms import scaffold

_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Timed rounds per row (>= 1).')
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.')
_STEPS = flags.DEFINE_integer('steps', 10, 'Local steps (batches) per client.')
_BATCH = flags.DEFINE_integer('batch_size', 20, 'Client batch size.')
_WINDOWS = flags.DEFINE_list('window_sizes', ['1', '10', '100'],
                             'Window sizes W.')
_READ_EVERY = flags.DEFINE_list('read_every', ['1', '10'],
                                'Window read periods E.')
_SCAFFOLD = flags.DEFINE_bool('scaffold', True, 'Include SCAFFOLD rows.')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the table here.')


def _model_fn():
  return tff.learning.models.from_keras_model(
      tasks.create_cnn_dropout_model(),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=tasks.emnist_input_spec(),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )


def _state_mb(state) -> float:
  return sum(np.asarray(x).nbytes for x in tf.nest.flatten(state)) / 2**20


def _peak_kb(pid: int) -> int:
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmHWM:'):
        return int(line.split()[1])
  return 0


def _learning_process_runner(build):
  def run(data, rounds):
    process = build()
    state = process.initialize()
    state = process.next(state, data).state  # Warm-up (tracing).
    start = time.perf_counter()
    for _ in range(rounds):
      state = process.next(state, data).state
    return (time.perf_counter() - start) / rounds, _state_mb(state)
  return run


def _multi_round_runner(build, rounds_per_call):
  def run(data, rounds):
    del rounds  # One timed call of `rounds_per_call` rounds.
    process = algorithms.build_multi_round_process(build(), rounds_per_call)
    calls_data = [tuple([d] * rounds_per_call) for d in data]
    state = process.initialize()
    state = process.next(state, calls_data).state  # Warm-up (tracing).
    start = time.perf_counter()
    state = process.next(state, calls_data).state
    return (time.perf_counter() - start) / rounds_per_call, _state_mb(state)
  return run


def _scaffold_runner(num_clients):
  def run(data, rounds):
    process = scaffold.build_scaffold(
        _model_fn, client_learning_rate=0.05, total_clients=num_clients)
    client_states = [scaffold.initial_client_state(_model_fn)] * num_clients
    state = process.initialize()
    state, client_states, _ = process.next(state, data, client_states)
    start = time.perf_counter()
    for _ in range(rounds):
      state, client_states, _ = process.next(state, data, client_states)
    elapsed = (time.perf_counter() - start) / rounds
    return elapsed, _state_mb(state) + _state_mb(client_states)
  return run


def _rows():
  sgd = lambda: tff.learning.optimizers.build_sgdm(0.05)
  rows = [('TFF build_weighted_fed_avg (baseline)', _learning_process_runner(
      lambda: tff.learning.algorithms.build_weighted_fed_avg(_model_fn, sgd())))]
  rows.append(('build_fed_win, no window', _learning_process_runner(
      lambda: algorithms.build_fed_win(_model_fn, sgd()))))
  for e in (int(x) for x in _READ_EVERY.value):
    for w in (int(x) for x in _WINDOWS.value):
      rows.append((f'build_fed_win WiMA W={w} E={e}', _learning_process_runner(
          lambda w=w, e=e: algorithms.build_fed_win(
              _model_fn, sgd(), window_size=w, window_read_every=e))))
  w, e = max(int(x) for x in _WINDOWS.value), max(
      int(x) for x in _READ_EVERY.value)
  factory_fed_avg = lambda: tff.learning.algorithms.build_weighted_fed_avg(
      _model_fn, sgd(), model_aggregator=(
          aggregators.WindowedModelAveragingFactory(w, read_every=e)))
  rows.append((f'TFF fed_avg + WindowedModelAveragingFactory W={w} E={e}',
               _learning_process_runner(factory_fed_avg)))
  if e > 1:
    rows.append((f'build_fed_win WiMA W={w} E={e}, {e} rounds per call',
                 _multi_round_runner(lambda: algorithms.build_fed_win(
                     _model_fn, sgd(), window_size=w, window_read_every=e),
                                     e)))
    rows.append((f'TFF fed_avg + WindowedModelAveragingFactory W={w} E={e}, '
                 f'{e} rounds per call',
                 _multi_round_runner(factory_fed_avg, e)))
    rows.append((f'TFF build_weighted_fed_avg, {e} rounds per call',
                 _multi_round_runner(
                     lambda: tff.learning.algorithms.build_weighted_fed_avg(
                         _model_fn, sgd()), e)))
  if _SCAFFOLD.value:
    rows.append(('SCAFFOLD (client states in and out)',
                 _scaffold_runner(_CLIENTS.value)))
  rows.append(('TFF build_weighted_fed_avg (baseline, again)', rows[0][1]))
  return rows


def main(argv):
  del argv
  if _ROUNDS.value < 1:
    raise app.UsageError('--rounds must be >= 1.')
  data = tasks.synthetic_client_datasets(
      _CLIENTS.value, _STEPS.value * _BATCH.value, _BATCH.value)
  results = []
  for name, run in _rows():
    with runtime.local_execution_context():
      (worker,) = runtime.running_workers()
      seconds, state_mb = run(data, _ROUNDS.value)
      worker_gb = _peak_kb(worker.pid) / 2**20
    results.append((name, seconds, state_mb, worker_gb))
    print(f'{name}: {seconds:.2f} s/round, state {state_mb:.1f} MB, '
          f'worker peak {worker_gb:.2f} GB', flush=True)
  baseline = (results[0][1] + results[-1][1]) / 2
  driver_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
  lines = [
      f'Model: EMNIST-62 cnn_dropout (1.2M params); {_CLIENTS.value} clients x '
      f'{_STEPS.value} steps of batch {_BATCH.value}; {_ROUNDS.value} timed '
      f'rounds per row after 1 warm-up; driver peak RSS {driver_gb:.2f} GB.',
      '',
      '| process | s/round | x baseline | state MB | worker peak GB |',
      '|---|---:|---:|---:|---:|',
  ]
  for name, seconds, state_mb, worker_gb in results:
    lines.append(f'| {name} | {seconds:.2f} | {seconds / baseline:.2f} | '
                 f'{state_mb:.1f} | {worker_gb:.2f} |')
  table = '\n'.join(lines)
  print(table)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      f.write(table + '\n')


if __name__ == '__main__':
  app.run(main)
