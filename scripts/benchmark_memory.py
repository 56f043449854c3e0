r"""Memory over long runs (issue 15 item 4): RSS every 50 rounds for 1,000.

Each run of --runs trains on the offline MNIST task (100 clients, 10 per
round) through the real loop on a fresh worker and samples driver and worker
RSS every --sample_every rounds; `tff_fedavg` (TFF's `build_weighted_fed_avg`
through the same loop) is the baseline. Writes `<run>.csv` per run as it
finishes (a run whose CSV exists is skipped: rerun to resume, --force to
redo), then `memory.md` (growth after round 100) and `memory.png`.

  .venv/bin/python scripts/benchmark_memory.py --output_dir=results/memory

takes about 25 minutes per run on an idle 2-core machine. A smoke run:

  .venv/bin/python scripts/benchmark_memory.py --rounds=4 --sample_every=2 \
    --output_dir=/tmp/memory_smoke
"""

import os
import sys
import tempfile

# The checkout's root first on the path: the benchmark code (`benchmarks/`,
# beside scripts/) is not part of the installed package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

from absl import app
from absl import flags

from benchmarks import memory
from benchmarks import memory_report

# pylint: enable=g-import-not-at-top,wrong-import-position

_RUNS = flags.DEFINE_list(
    'runs', list(memory.RUNS), f'Runs, from {sorted(memory.RUNS)}.'
)
_ROUNDS = flags.DEFINE_integer('rounds', 1000, 'Rounds per run.')
_SAMPLE_EVERY = flags.DEFINE_integer(
    'sample_every', 50, 'Rounds between RSS samples.'
)
_OUTPUT_DIR = flags.DEFINE_string(
    'output_dir', None, 'Where the CSVs, memory.md and memory.png go.'
)
_FORCE = flags.DEFINE_bool('force', False, 'Redo runs whose CSV exists.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  unknown = sorted(set(_RUNS.value) - set(memory.RUNS))
  if unknown:
    raise app.UsageError(
        f'--runs: unknown {unknown}; from {sorted(memory.RUNS)}.'
    )
  if _ROUNDS.value % _SAMPLE_EVERY.value:
    raise app.UsageError('--rounds must be a multiple of --sample_every.')
  if not _OUTPUT_DIR.value:
    raise app.UsageError('--output_dir is required.')
  os.makedirs(_OUTPUT_DIR.value, exist_ok=True)
  curves = {}
  for run in _RUNS.value:
    path = memory_report.csv_path(_OUTPUT_DIR.value, run)
    if _FORCE.value or not os.path.exists(path):
      print(f'{run}: {_ROUNDS.value} rounds ...', flush=True)
      with tempfile.TemporaryDirectory() as runs_dir:
        samples = memory.run_curve(
            run,
            total_rounds=_ROUNDS.value,
            sample_every=_SAMPLE_EVERY.value,
            output_dir=runs_dir,
        )
      memory_report.write_csv(path, samples)
    curves[run] = memory_report.read_csv(path)
  table = memory_report.markdown_table(curves)
  print(table, flush=True)
  with open(os.path.join(_OUTPUT_DIR.value, 'memory.md'), 'w') as f:
    f.write(table + '\n')
  memory_report.plot(curves, os.path.join(_OUTPUT_DIR.value, 'memory.png'))


if __name__ == '__main__':
  log_levels.run(main)
