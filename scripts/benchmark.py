r"""Performance report: TFF overheads, window, SCAFFOLD, several workers, memory.

Writes a markdown table (ratios against TFF's `build_weighted_fed_avg`
measured first and last in the same run, and against the bound) with:
1. FedAvg through `tff_fedwin.algorithms.build_fed_win` (held batches: one
   pass over a client's dataset, then the steps over tensors) vs TFF's
   builder (dataset reduce), and each with TFF's other loop forms; "client
   data by id": the worker builds the clients' datasets from a tensor bundle
   (`algorithms.client_data_bundle`) instead of receiving them;
2. the bound (the same FedAvg arithmetic as one in-process `tf.function` per
   round over tensors; every row's ratio to it is reported) and the same client
   training as an in-process `tf.data` loop;
3. window overhead (W=100 read every 10 rounds: in the state, one and 10
   rounds per call, and kept by the program, filled first), WSM clients and
   SCAFFOLD, each also against its own bound (the same algorithm's arithmetic
   as one `tf.function`, column "x own bound");
4. FedNova, FedSAM, FedASAM, FedDyn, FedCM and FedACG, each against FedAvg's
   bound (`benchmarks.algorithm_rows`);
5. FedAvg on 1, 2 and 4 local TFF workers (clients split by TFF's
   mergeable-computation context);
6. peak memory of the workers per row and of the driver.

`--repeats=3` runs the whole list three times, the second backward, and
reports each cell's median and range (the machine is shared: single runs of a
row differ by ~0.1-0.2x). `--rows` runs a part of the list (a regular
expression on the row names; the references come along). `--paired=N`
measures each row that has an own bound against it instead: the rows of one
bound share a fresh worker and their rounds interleave with the bound's, N
cycles, so both sides of a ratio, and the rows of one bound, see the same
minutes (`benchmarks.paired`).

  .venv/bin/python scripts/benchmark.py --repeats=3 --output=benchmark.md
  .venv/bin/python scripts/benchmark.py --repeats=6 \
      --rows='^FedAvg via build_fed_win$|^WSM|files'
  .venv/bin/python scripts/benchmark.py --paired=10
  .venv/bin/python scripts/benchmark.py --paired=10 --model_family=word_lstm \
      --rows='^FedAvg via build_fed_win|^build_fed_win WiMA W=100 E=10$'
"""

import os
import sys

# The checkout's root first on the path: the benchmark code (`benchmarks/`,
# beside scripts/) is not part of the installed package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

from collections.abc import Callable
from typing import Any, NamedTuple, Optional

from absl import flags

# Without TensorFlow: the flags and their checks (`--rows` included) come
# first, so a bad flag is refused in about a second; `_import_tensorflow`
# imports TFF and the row builders once the flags passed.
from benchmarks import algorithm_rows
from benchmarks import row_order

# pylint: enable=g-import-not-at-top,wrong-import-position

_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Timed rounds per row (>= 1).')
_REPEATS = flags.DEFINE_integer(
    'repeats',
    1,
    'Runs of the whole list of rows (>= 1); > 1 reports medians and ranges.',
)
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.')
_STEPS = flags.DEFINE_integer('steps', 10, 'Local steps (batches) per client.')
_BATCH = flags.DEFINE_integer('batch_size', 20, 'Client batch size.')
_WORKERS = flags.DEFINE_list(
    'workers', ['1', '2', '4'], 'Local worker counts for the FedAvg rows.'
)
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the table here.')
_PAIRED = flags.DEFINE_integer(
    'paired',
    0,
    'If > 0: instead of the table, each row with an own bound against that '
    "bound, the rows of one bound interleaved with the bound's rounds, this "
    'many cycles (--rounds unused).',
)
_FAMILY = flags.DEFINE_enum(
    'model_family',
    'cnn',
    list(row_order.MODEL_FAMILIES),
    'The model every row trains (benchmarks.model_families): cnn, EMNIST-62 '
    "cnn_dropout; word_lstm, TFF's StackOverflow LSTM (sequences of 20 over "
    '10,004 ids); char_lstm, the shakespeare character LSTM. WSM rows only '
    'with cnn (one label per example), FedFA likewise (its features).',
)
_ROWS = flags.DEFINE_string(
    'rows',
    None,
    'Python regular expression: run only the rows whose name it matches, '
    "with TFF's baseline, the bound and their own bounds (default: all).",
)

_LR = 0.05
_BASELINE = 'TFF build_weighted_fed_avg (baseline)'
_BOUND = row_order.BOUND_NAME
_WSM_BOUND = 'bound: same WSM-client arithmetic, one tf.function'
_SCAFFOLD_BOUND = 'bound: same SCAFFOLD arithmetic, one tf.function'
_CLASSES = 62  # EMNIST-62.


# TFF's loop forms (`tff.learning.LoopImplementation`), by name: the rows'
# names are known before TensorFlow is imported.
_LOOPS = ('DATASET_ITERATOR', 'DATASET_REDUCE')


class _Row(NamedTuple):
  """A row before TensorFlow is imported: `make()` builds its `run`."""

  name: str
  make: Callable[[], Any]
  num_workers: int = 1
  own_bound: Optional[str] = None


def _import_tensorflow():
  """Imports TFF and the row builders, once the flags passed their checks."""
  # pylint: disable=g-import-not-at-top,global-statement,redefined-outer-name
  # pylint: disable=global-variable-undefined
  global tff, algorithms, model, paired, program_window_rows, bench
  import tensorflow_federated as tff

  from benchmarks import model_families
  from benchmarks import paired
  from benchmarks import program_window_rows
  from benchmarks import rounds as bench
  from tff_fedwin import algorithms

  model = model_families.family(_FAMILY.value)


def _fed_avg_rows(sgd) -> list[_Row]:
  """TFF's builder and FedAvg through `build_fed_win`, in TFF's loop forms."""
  fed_win = lambda **kw: (
      lambda: algorithms.build_fed_win(model.model_fn, sgd(), **kw)
  )
  return [
      _Row(
          _BASELINE,
          lambda: bench.learning_process_row(
              bench.fed_avg_baseline(_LR, model.model_fn)
          ),
      ),
      _Row(
          'TFF build_weighted_fed_avg, loop_implementation=' 'DATASET_ITERATOR',
          lambda: bench.learning_process_row(
              lambda: tff.learning.algorithms.build_weighted_fed_avg(
                  model.model_fn,
                  sgd(),
                  loop_implementation=(
                      tff.learning.LoopImplementation.DATASET_ITERATOR
                  ),
              )
          ),
      ),
      _Row(
          'FedAvg via build_fed_win',
          lambda: bench.learning_process_row(fed_win()),
          own_bound=_BOUND,
      ),
      _Row(
          'FedAvg via build_fed_win, server state as files',
          lambda: bench.learning_process_row(
              fed_win(), server_state_files=True
          ),
          own_bound=_BOUND,
      ),
      _Row(
          'FedAvg via build_fed_win, server state as files, client data by '
          'id (default with local workers)',
          lambda: bench.learning_process_row(
              fed_win(), server_state_files=True, client_data_by_id=True
          ),
          own_bound=_BOUND,
      ),
      *(
          _Row(
              f'FedAvg via build_fed_win, loop_implementation={loop}',
              lambda loop=loop: bench.learning_process_row(
                  fed_win(
                      loop_implementation=(
                          tff.learning.LoopImplementation[loop]
                      )
                  )
              ),
          )
          for loop in _LOOPS
      ),
      _Row(
          _BOUND,
          lambda: bench.bound_row(model.keras_fn, _LR),
          num_workers=0,
      ),
      _Row(
          'same client training, plain TensorFlow, `for batch in '
          'dataset` (not a bound)',
          lambda: bench.plain_tensorflow_row(model.keras_fn, _LR),
          num_workers=0,
      ),
  ]


def _window_and_wsm_rows(sgd) -> list[_Row]:
  """WiMA W=100 E=10 (in the state, kept by the program), WSM clients."""
  wima = lambda: algorithms.build_fed_win(
      model.model_fn, sgd(), window_size=100, window_read_every=10
  )
  wsm = lambda: algorithms.build_fed_win(
      model.model_fn, sgd(), client_loss='wsm', num_classes=_CLASSES
  )
  return [
      _Row(
          'build_fed_win WiMA W=100 E=10',
          lambda: bench.learning_process_row(wima),
          own_bound=_BOUND,
      ),
      _Row(
          'build_fed_win WiMA W=100 E=10, server state as files',
          lambda: bench.learning_process_row(wima, server_state_files=True),
          own_bound=_BOUND,
      ),
      _Row(
          'build_fed_win WiMA W=100 E=10, window kept by the program, server '
          'state as files, client data by id (the default with local '
          'workers)',
          lambda: program_window_rows.program_window_row(
              lambda: algorithms.build_fed_win(model.model_fn, sgd()),
              server_state_files=True,
              client_data_by_id=True,
              window_size=100,
              read_every=10,
          ),
          own_bound=_BOUND,
      ),
      _Row(
          'build_fed_win WiMA W=100 E=10, 10 rounds per call',
          lambda: bench.multi_round_row(wima, 10),
      ),
      _Row(
          'WSM clients via build_fed_win',
          lambda: bench.learning_process_row(wsm),
          own_bound=_WSM_BOUND,
      ),
      _Row(
          'WSM clients via build_fed_win, server state as files, client '
          'data by id (default with local workers)',
          lambda: bench.learning_process_row(
              wsm, server_state_files=True, client_data_by_id=True
          ),
          own_bound=_WSM_BOUND,
      ),
      _Row(
          _WSM_BOUND,
          lambda: bench.bound_row(
              model.keras_fn,
              _LR,
              client_loss='wsm',
              num_classes=_CLASSES,
          ),
          num_workers=0,
      ),
  ]


def _scaffold_rows() -> list[_Row]:
  """SCAFFOLD with its states as values and as files, and its bound."""
  scaffold = lambda **kw: (
      lambda: bench.scaffold_row(model.model_fn, _LR, **kw)
  )
  return [
      _Row(
          'SCAFFOLD, client states as TFF values',
          scaffold(),
          own_bound=_SCAFFOLD_BOUND,
      ),
      _Row(
          'SCAFFOLD, client states as files',
          scaffold(client_state_transfer='files'),
          own_bound=_SCAFFOLD_BOUND,
      ),
      _Row(
          'SCAFFOLD, client and server states as files',
          scaffold(client_state_transfer='files', server_state_files=True),
          own_bound=_SCAFFOLD_BOUND,
      ),
      _Row(
          'SCAFFOLD, client and server states as files, client data by id '
          '(default with local workers)',
          scaffold(
              client_state_transfer='files',
              server_state_files=True,
              client_data_by_id=True,
          ),
          own_bound=_SCAFFOLD_BOUND,
      ),
      _Row(
          _SCAFFOLD_BOUND,
          lambda: bench.bound_row(model.keras_fn, _LR, scaffold=True),
          num_workers=0,
      ),
  ]


def _rows() -> list[_Row]:
  """Every row of the table, in order; TFF's baseline first and last."""
  sgd = lambda: tff.learning.optimizers.build_sgdm(_LR)
  window_and_wsm = _window_and_wsm_rows(sgd)
  if _FAMILY.value != 'cnn':  # WSM needs one label per example.
    window_and_wsm = [r for r in window_and_wsm if 'WSM' not in r.name]
  rows = [
      *_fed_avg_rows(sgd),
      *window_and_wsm,
      *_scaffold_rows(),
      *algorithm_rows.algorithm_rows(
          _Row,
          lambda: model,
          sgd,
          _LR,
          _BOUND,
          features=_FAMILY.value == 'cnn',  # FeatureModel: Sequential only.
      ),
  ]
  for n in (int(w) for w in _WORKERS.value):
    if n > 1:
      rows.append(
          rows[0]._replace(
              name=f'TFF build_weighted_fed_avg on {n} local ' 'workers',
              num_workers=n,
          )
      )
  rows.append(rows[0])
  return rows


def _checked_rows() -> list[_Row]:
  """The rows the flags ask for; a bad flag exits with one line naming it."""
  if _ROUNDS.value < 1:
    sys.exit('benchmark.py: --rounds must be >= 1.')
  if _REPEATS.value < 1:
    sys.exit('benchmark.py: --repeats must be >= 1.')
  if _PAIRED.value < 0:
    sys.exit('benchmark.py: --paired must be >= 0.')
  rows = _rows()
  if _ROWS.value is not None:
    try:
      rows = row_order.select(rows, _ROWS.value, (_BASELINE, _BOUND))
    except ValueError as e:
      sys.exit(f'benchmark.py: {e}')
  return rows


def _checked(argv) -> list[_Row]:
  """The selected rows; a bad flag exits with one line, before TensorFlow."""
  if len(argv) > 1:
    sys.exit(f'benchmark.py: unexpected arguments {argv[1:]}.')
  return _checked_rows()


def main(selected: list[_Row]):
  """Runs the `selected` rows (`_checked`)."""
  _import_tensorflow()
  rows = [
      bench.Row(r.name, r.make(), r.num_workers, r.own_bound) for r in selected
  ]
  if _PAIRED.value > 0:
    paired.run_and_report(
        rows,
        num_pairs=_PAIRED.value,
        clients=_CLIENTS.value,
        steps=_STEPS.value,
        batch_size=_BATCH.value,
        output=_OUTPUT.value,
        family=_FAMILY.value,
    )
    return
  bench.run_and_report(
      rows,
      baseline_name=_BASELINE,
      bound_name=_BOUND,
      rounds=_ROUNDS.value,
      clients=_CLIENTS.value,
      steps=_STEPS.value,
      batch_size=_BATCH.value,
      output=_OUTPUT.value,
      repeats=_REPEATS.value,
      family=_FAMILY.value,
  )


if __name__ == '__main__':
  log_levels.run(main, before_tensorflow=_checked)
