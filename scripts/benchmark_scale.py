r"""Scale benchmark (issue 15 items 3 and 5): client states at 3,400 clients.

Part `scale`: SCAFFOLD and SCAFFOLD + WSM + IMA with the EMNIST-62
`cnn_dropout` (1.2M parameters) on --num_clients synthetic EMNIST-shaped
clients through `run_training` with the --large_client_states store (disk), at
each --clients_per_round, for enough rounds that --coverage of the clients
have a state (or --rounds); then the same on --memory_num_clients clients with
the in-memory store, for the round-time ratio. Reports driver and worker peak
RSS, s/round, the ratio disk/memory, checkpoint time and the bytes of every
checkpoint against the clients updated since the previous one, and each
row's driver round work without TFF (what the store adds to a round).

Part `population`: the same small-model SCAFFOLD round with --populations
clients (per-round time must not depend on the population), through the loop
and as the driver's per-round work alone.

The full run (defaults: 3,400 clients, 312 rounds at 10 clients per round and
62 at 50, i.e. 60% of the clients with a state; in-memory rows on 200 clients
for as many rounds) takes about 1 hour on an idle 2-core machine and 1.75
hours at a load of 6 (measured round times: 2.1-2.8 s at 10 clients, 8-13 s
at 50). Peak RSS: driver 2.3-2.7 GB on the disk rows, about 3.5 GB on the
in-memory rows; worker 5.5-6 GB at 50 clients per round. Disk: up to 10 GB
of client states per large row and 5 GB of in-memory snapshots, deleted after
each row. --memory_rounds=60 saves about 25 minutes.

  .venv/bin/python scripts/benchmark_scale.py --output=benchmark_scale.md

A smoke run (a few minutes):

  .venv/bin/python scripts/benchmark_scale.py --num_clients=200 \
    --memory_num_clients=50 --clients_per_round=5 --rounds=4 \
    --rounds_per_checkpoint=2 --examples_per_client=4 --batch_size=4 \
    --populations=100,1000 --population_rounds=5
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

from benchmarks import scale
from benchmarks import scale_report
from tff_fedwin import training

# pylint: enable=g-import-not-at-top,wrong-import-position

_PARTS = flags.DEFINE_list(
    'parts', ['scale', 'population'], 'Parts to run: scale, population.'
)
_VARIANTS = flags.DEFINE_list(
    'variants', list(scale.VARIANTS), 'SCAFFOLD variants of the scale part.'
)
_NUM_CLIENTS = flags.DEFINE_integer(
    'num_clients', 3400, 'Population of the large (disk-store) rows.'
)
_MEMORY_NUM_CLIENTS = flags.DEFINE_integer(
    'memory_num_clients',
    200,
    'Population of the in-memory-store rows (200 SCAFFOLD states of '
    'cnn_dropout: 0.9 GB).',
)
_MEMORY_ROUNDS = flags.DEFINE_integer(
    'memory_rounds', 0, 'Rounds of the in-memory rows; 0: as the large rows.'
)
_CLIENTS_PER_ROUND = flags.DEFINE_list(
    'clients_per_round', ['10', '50'], 'Clients per round of the scale part.'
)
_ROUNDS = flags.DEFINE_integer(
    'rounds', 0, 'Rounds per scale row; 0: enough for --coverage.'
)
_COVERAGE = flags.DEFINE_float(
    'coverage', 0.6, 'Expected fraction of clients with a state (--rounds=0).'
)
_EXAMPLES = flags.DEFINE_integer(
    'examples_per_client', 20, 'Examples per synthetic client.'
)
_BATCH = flags.DEFINE_integer('batch_size', 20, 'Client batch size.')
_CHECKPOINT = flags.DEFINE_integer(
    'rounds_per_checkpoint', 10, 'Checkpoint every this many rounds.'
)
_WARMUP = flags.DEFINE_integer(
    'warmup_rounds', 2, 'Rounds left out of the median round time.'
)
_LARGE_STORE = flags.DEFINE_enum(
    'large_client_states',
    'disk',
    list(training.CLIENT_STATE_KINDS),
    'Store of the large rows.',
)
_POPULATIONS = flags.DEFINE_list(
    'populations', ['100', '3400', '34000'], 'Populations of part population.'
)
_POPULATION_K = flags.DEFINE_integer(
    'population_clients_per_round', 10, 'Clients per round, part population.'
)
_POPULATION_ROUNDS = flags.DEFINE_integer(
    'population_rounds', 30, 'Rounds per population row.'
)
_POPULATION_STORE = flags.DEFINE_enum(
    'population_client_states',
    'disk',
    list(training.CLIENT_STATE_KINDS),
    'Store of the population rows.',
)
_OUTPUT_DIR = flags.DEFINE_string(
    'output_dir', None, 'Run directories (default: a new temporary one).'
)
_KEEP = flags.DEFINE_bool('keep_outputs', False, 'Keep the run directories.')
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the tables here.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  common = dict(
      examples_per_client=_EXAMPLES.value,
      batch_size=_BATCH.value,
      warmup_rounds=_WARMUP.value,
      output_dir=_OUTPUT_DIR.value,
  )
  tables = []
  if 'scale' in _PARTS.value:
    specs = scale_report.scale_specs(
        variants=_VARIANTS.value,
        clients_per_round=[int(k) for k in _CLIENTS_PER_ROUND.value],
        num_clients=_NUM_CLIENTS.value,
        memory_num_clients=_MEMORY_NUM_CLIENTS.value,
        rounds=_ROUNDS.value,
        coverage=_COVERAGE.value,
        large_client_states=_LARGE_STORE.value,
        memory_rounds=_MEMORY_ROUNDS.value,
    )
    tables.append(
        scale_report.run_scale_benchmark(
            specs,
            rounds_per_checkpoint=_CHECKPOINT.value,
            keep_outputs=_KEEP.value,
            **common,
        )
    )
  if 'population' in _PARTS.value:
    tables.append(
        scale_report.run_population_benchmark(
            [int(n) for n in _POPULATIONS.value],
            clients_per_round=_POPULATION_K.value,
            rounds=_POPULATION_ROUNDS.value,
            client_states=_POPULATION_STORE.value,
            **common,
        )
    )
  report = '\n\n'.join(tables)
  print(report, flush=True)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      f.write(report + '\n')


if __name__ == '__main__':
  log_levels.run(main)
