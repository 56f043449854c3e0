r"""LEAF at FEMNIST's size (issue 44 item 4): first start, later start, RSS.

Writes a FEMNIST-shaped synthetic LEAF directory (`benchmarks.synthetic_leaf`:
3,500 users, 800k examples, 36 files per split, about 5.5 GB of JSON), then
measures, each in a fresh Python process, as `scripts/run_experiment.py`
starts: the imports alone, the first start (the data step before TensorFlow:
the JSON checked and converted into the binary cache, about 2.5 GB, by parallel
processes; then `leaf_task`) and a later start (the cache found by the files'
stat digest, no JSON byte read): wall time, the driver's peak RSS (VmHWM) and
the largest of the conversion processes'. Then an eval round of two models with
and without `--eval_per_client` (`benchmarks.per_client_eval`). Prints markdown
tables; deletes what it wrote unless --keep.

  .venv/bin/python scripts/benchmark_leaf.py --work_dir=/tmp/leafbench

A tiny run (seconds):

  .venv/bin/python scripts/benchmark_leaf.py --num_users=4 \
    --num_examples=40 --num_files=2
"""

import os
import sys

# The checkout's root first on the path: the benchmark code (`benchmarks/`,
# beside scripts/) is not part of the installed package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

import shutil
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import synthetic_leaf

# pylint: enable=g-import-not-at-top,wrong-import-position

_NUM_USERS = flags.DEFINE_integer(
    'num_users', synthetic_leaf.FEMNIST_USERS, 'LEAF users (clients).'
)
_NUM_EXAMPLES = flags.DEFINE_integer(
    'num_examples', synthetic_leaf.FEMNIST_EXAMPLES, 'Examples, both splits.'
)
_NUM_FILES = flags.DEFINE_integer(
    'num_files', synthetic_leaf.LEAF_FILES, 'JSON files per split.'
)
_WORK_DIR = flags.DEFINE_string(
    'work_dir', None, 'Where to write (default: a new temporary directory).'
)
_KEEP = flags.DEFINE_bool('keep', False, 'Keep the JSON and the cache.')
_EVAL_REPEATS = flags.DEFINE_integer(
    'eval_repeats',
    5,
    'Timed eval rounds, pooled and with --eval_per_client alternately '
    '(`benchmarks.per_client_eval`); 0 skips them.',
)
_OUTPUT = flags.DEFINE_string('output', None, 'Also write the table here.')

_MB = 2**20


def _row(name, result):
  return (
      f'| {name} | {result["wall_seconds"]:.1f} | '
      f'{result["start_seconds"]:.1f} | {result["peak_rss_mb"]:.0f} | '
      f'{result["children_peak_rss_mb"]:.0f} |'
  )


def _eval_report(data_dir, cache_dir):
  result = synthetic_leaf.run_in_child(
      'benchmarks.per_client_eval',
      'measure',
      [data_dir, cache_dir, _EVAL_REPEATS.value],
  )
  pooled, per_client = result['pooled_seconds'], result['per_client_seconds']
  return '\n'.join(
      [
          f'Eval round of two models on the {result["num_test_examples"]} '
          f'test examples of {result["num_test_clients"]} test clients '
          f'(median of {_EVAL_REPEATS.value}, alternated; '
          f'{result["rows_bytes_per_round"] / 2**10:.0f} KB of rows a round):',
          '',
          '| eval round | seconds | ratio |',
          '|---|---|---|',
          f'| pooled only | {pooled:.2f} | 1.00 |',
          f'| with --eval_per_client | {per_client:.2f} | '
          f'{per_client / pooled:.2f} |',
          '',
          f'all pooled: {[round(t, 3) for t in result["pooled_all"]]}',
          f'all per-client: {[round(t, 3) for t in result["per_client_all"]]}',
      ]
  )


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  work_dir = _WORK_DIR.value or tempfile.mkdtemp(prefix='leafbench')
  os.makedirs(work_dir, exist_ok=True)
  data_dir = os.path.join(work_dir, 'leaf')
  cache_dir = os.path.join(work_dir, 'cache')
  try:
    started = time.perf_counter()
    written = synthetic_leaf.write_synthetic_femnist(
        data_dir,
        num_users=_NUM_USERS.value,
        num_examples=_NUM_EXAMPLES.value,
        num_files=_NUM_FILES.value,
    )
    print(
        f'Wrote {written.json_bytes / _MB:.0f} MB of LEAF JSON '
        f'({written.num_users} users, {written.num_train_examples} train + '
        f'{written.num_test_examples} test examples) in '
        f'{time.perf_counter() - started:.0f} s.',
        flush=True,
    )
    imports = synthetic_leaf.measure_start(None, None)
    first = synthetic_leaf.measure_start(data_dir, cache_dir)
    later = synthetic_leaf.measure_start(data_dir, cache_dir)
    cache_mb = synthetic_leaf.directory_bytes(cache_dir) / _MB
    report = '\n'.join(
        [
            f'LEAF FEMNIST-shaped: {written.num_users} users, '
            f'{written.num_train_examples + written.num_test_examples} '
            'examples, '
            f'{_NUM_FILES.value} files per split, '
            f'{written.json_bytes / _MB:.0f} MB JSON, {cache_mb:.0f} MB cache.',
            '',
            '| start | wall time (s) | data step + leaf_task + first reads '
            '(s) | driver peak RSS (MB) | conversion processes peak RSS (MB) |',
            '|---|---|---|---|---|',
            _row('imports only', imports),
            _row('first start (conversion)', first),
            _row('later start (cache hit)', later),
        ]
    )
    if _EVAL_REPEATS.value:
      report += '\n\n' + _eval_report(data_dir, cache_dir)
    print(report, flush=True)
    if _OUTPUT.value:
      with open(_OUTPUT.value, 'w') as f:
        f.write(report + '\n')
  finally:
    if not _KEEP.value:
      shutil.rmtree(data_dir, ignore_errors=True)
      shutil.rmtree(cache_dir, ignore_errors=True)
      if not _WORK_DIR.value:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == '__main__':
  log_levels.run(main, import_tensorflow=False)  # Its starts are subprocesses.
