r"""Benchmark: round time and state size of FedAvg vs FedAvg + window vs SCAFFOLD.

Same model (the EMNIST-62 `cnn_dropout` CNN, 1.2M parameters), same synthetic
clients and seeds in every row; every row on a fresh managed TFF worker. The
baseline, TFF's own `build_weighted_fed_avg` called once per round, is measured
first and last; ratios are against the mean of the two. Rows "E rounds per
call" run E rounds inside one TFF call (`build_multi_round_process`), so the
state crosses the Python boundary once per E rounds; their time is per round.
Rows "window kept by the program" run `ProgramWindowRunner` (the process
without a window; the window's models in files, its sum in the driver).
`--rows` runs a part of the list (a regular expression on the row names; the
baseline and the bound come along).

  .venv/bin/python scripts/benchmark_window.py --rounds=3 --output=bench.md
  .venv/bin/python scripts/benchmark_window.py --rows='program'
"""

import os
import sys

# The checkout's root first on the path: the benchmark code (`benchmarks/`,
# beside scripts/) is not part of the installed package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

from absl import app
from absl import flags
import tensorflow_federated as tff

from benchmarks import program_window_rows
from benchmarks import rounds as bench
from benchmarks import row_order
from tff_fedwin import aggregators
from tff_fedwin import algorithms
from tff_fedwin import tasks

# pylint: enable=g-import-not-at-top,wrong-import-position

_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Timed rounds per row (>= 1).')
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.')
_STEPS = flags.DEFINE_integer('steps', 10, 'Local steps (batches) per client.')
_BATCH = flags.DEFINE_integer('batch_size', 20, 'Client batch size.')
_WINDOWS = flags.DEFINE_list(
    'window_sizes', ['1', '10', '100'], 'Window sizes W.'
)
_READ_EVERY = flags.DEFINE_list(
    'read_every', ['1', '10'], 'Window read periods E.'
)
_SCAFFOLD = flags.DEFINE_bool('scaffold', True, 'Include the SCAFFOLD row.')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the table here.')
_ROWS = flags.DEFINE_string(
    'rows',
    None,
    'Python regular expression: run only the rows whose name it matches, '
    "with TFF's baseline and the bound (default: all).",
)

_LR = 0.05
_BASELINE = 'TFF build_weighted_fed_avg (baseline)'
_BOUND = bench.BOUND_NAME


def _rows() -> list[bench.Row]:
  model_fn = bench.emnist_model_fn
  sgd = lambda: tff.learning.optimizers.build_sgdm(_LR)
  fed_win = lambda **kw: (
      lambda: algorithms.build_fed_win(model_fn, sgd(), **kw)
  )
  rows = [
      bench.Row(
          _BASELINE, bench.learning_process_row(bench.fed_avg_baseline(_LR))
      ),
      bench.Row(
          _BOUND,
          bench.bound_row(tasks.create_cnn_dropout_model, _LR),
          num_workers=0,
      ),
  ]
  rows.append(
      bench.Row(
          'build_fed_win, no window', bench.learning_process_row(fed_win())
      )
  )
  windows = [int(w) for w in _WINDOWS.value]
  periods = [int(e) for e in _READ_EVERY.value]
  for e in periods:
    for w in windows:
      rows.append(
          bench.Row(
              f'build_fed_win WiMA W={w} E={e}',
              bench.learning_process_row(
                  fed_win(window_size=w, window_read_every=e)
              ),
          )
      )
  w, e = max(windows), max(periods)
  rows.append(
      bench.Row(
          f'build_fed_win WiMA W={w} E=1, server state as files',
          bench.learning_process_row(
              fed_win(window_size=w, window_read_every=1),
              server_state_files=True,
          ),
      )
  )
  rows.append(
      bench.Row(
          f'build_fed_win WiMA W={w} E=1, window kept by the program',
          program_window_rows.program_window_row(fed_win(), window_size=w),
      )
  )
  # Active from round 2, so every timed round does the steady-state work of
  # any W: write w^t, read back w^{t-W}, send m^t (set_model_weights).
  rows.append(
      bench.Row(
          'build_fed_win IMA W=2 broadcast, window kept by the program '
          '(active every timed round)',
          program_window_rows.program_window_row(
              fed_win(), window_size=2, mode='broadcast'
          ),
      )
  )
  factory = lambda: tff.learning.algorithms.build_weighted_fed_avg(
      model_fn,
      sgd(),
      model_aggregator=(
          aggregators.WindowedModelAveragingFactory(w, read_every=e)
      ),
  )
  rows.append(
      bench.Row(
          f'TFF fed_avg + WindowedModelAveragingFactory W={w} ' f'E={e}',
          bench.learning_process_row(factory),
      )
  )
  if e > 1:
    rows.append(
        bench.Row(
            f'build_fed_win WiMA W={w} E={e}, {e} rounds per call',
            bench.multi_round_row(
                fed_win(window_size=w, window_read_every=e), e
            ),
        )
    )
    rows.append(
        bench.Row(
            f'TFF fed_avg + WindowedModelAveragingFactory W={w} E={e}, {e} rounds '
            'per call',
            bench.multi_round_row(factory, e),
        )
    )
    rows.append(
        bench.Row(
            f'TFF build_weighted_fed_avg, {e} rounds per call',
            bench.multi_round_row(bench.fed_avg_baseline(_LR), e),
        )
    )
  if _SCAFFOLD.value:
    rows.append(
        bench.Row(
            'SCAFFOLD (client states in and out as files, the default '
            'with local workers)',
            bench.scaffold_row(model_fn, _LR, client_state_transfer='files'),
        )
    )
  rows.append(rows[0])
  return rows


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if _ROUNDS.value < 1:
    raise app.UsageError('--rounds must be >= 1.')
  rows = _rows()
  if _ROWS.value is not None:
    try:
      rows = row_order.select(rows, _ROWS.value, (_BASELINE, _BOUND))
    except ValueError as e:
      raise app.UsageError(str(e)) from e
  table = bench.run_and_report(
      rows,
      baseline_name=_BASELINE,
      bound_name=_BOUND,
      rounds=_ROUNDS.value,
      clients=_CLIENTS.value,
      steps=_STEPS.value,
      batch_size=_BATCH.value,
      output=None,
  )
  w = max(int(w) for w in _WINDOWS.value)
  model = tasks.create_cnn_dropout_model()
  template = [v.numpy() for v in model.trainable_weights]
  seconds = program_window_rows.window_work_seconds(template, w)
  line = (
      f"The program window's own work per round (W={w}, cnn_dropout, measured "
      f'apart: file write and read-back, float64 sum, measurements, mean): '
      f'{seconds * 1000:.1f} ms.'
  )
  print(line, flush=True)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      f.write(table + '\n\n' + line + '\n')


if __name__ == '__main__':
  log_levels.run(main)
