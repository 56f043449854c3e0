"""Every script in scripts/ is as quiet as run_experiment.py by default.

Each script runs as a user runs it, in its own process, on its smallest real
configuration (one timed round of 2 clients x 1 step for the benchmarks; the
report of finished runs for reproduce_papers.py, whose smallest training run
takes minutes): its stderr holds none of TensorFlow's INFO lines (grappler
sessions from TFF's compiler in the driver, oneDNN, CUDA stubs), gRPC's fork
lines or absl's INFO lines, and its stdout its progress and its table. With
`--verbosity=0` the lines come back (`tff_fedwin.log_levels`). benchmark.py
and benchmark_window.py are checked on their runs in scripts_smoke_test.py
(every section, and the paired mode), not run a second time here.
"""

import json
import os
import sys

import pytest

from tests import script_runs
from tests.scripts import quiet_lines
from tff_fedwin.experiments import papers

_TINY = ['--rounds=1', '--clients=2', '--steps=1', '--batch_size=2']


def _run(script, *args):
  """Runs scripts/`script` with `args` as a user would; (stdout, stderr)."""
  result = script_runs.run(
      [sys.executable, os.path.join(script_runs.ROOT, 'scripts', script), *args]
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout, result.stderr


def _benchmark_args(tmp_path):
  del tmp_path
  return ['benchmark.py', *_TINY, '--workers=1', '--rows=^bound: same FedAvg']


def _benchmark_memory_args(tmp_path):
  return [
      'benchmark_memory.py',
      '--runs=tff_fedavg',
      '--rounds=1',
      '--sample_every=1',
      f'--output_dir={tmp_path / "memory"}',
  ]


def _benchmark_scale_args(tmp_path):
  return [
      'benchmark_scale.py',
      '--parts=population',
      '--populations=10',
      '--population_clients_per_round=2',
      '--population_rounds=1',
      '--warmup_rounds=0',  # A warm-up row of 1 round, not 3.
      '--examples_per_client=2',
      '--batch_size=2',
      f'--output_dir={tmp_path / "scale"}',
  ]


def _benchmark_leaf_args(tmp_path):
  return [
      'benchmark_leaf.py',
      '--num_users=4',
      '--num_examples=40',
      '--num_files=2',
      '--eval_repeats=1',
      f'--work_dir={tmp_path / "leaf"}',
  ]


def _finished_shakespeare_run(run_dir):
  """Writes what run_experiment leaves in `run_dir`: summary and metrics."""
  run_dir.mkdir(parents=True)
  accuracy = {'accuracy': {'mean': 0.5, 'std': 0.0}}
  summary = {
      'window': accuracy,
      'global': accuracy,
      'total_round_and_eval_time_seconds': 60.0,
      'wall_time_seconds': 70.0,
      'resumed_from_round': None,
  }
  (run_dir / 'summary.json').write_text(json.dumps(summary))
  (run_dir / 'metrics.csv').write_text(
      'round_num,window/accuracy,global/accuracy\n1,0.5,0.5\n'
  )


def _reproduce_papers_args(tmp_path):
  # Every run of the experiment finished: the script reads and reports them.
  for label in papers.paper_experiments()['shakespeare']:
    _finished_shakespeare_run(
        tmp_path / 'runs' / 'shakespeare' / f'{label.replace(" ", "_")}_seed0'
    )
  return [
      'reproduce_papers.py',
      '--experiments=shakespeare',
      '--seeds=0',
      f'--root_output_dir={tmp_path / "runs"}',
      f'--output={tmp_path / "tables.md"}',
      f'--plot_dir={tmp_path / "plots"}',
      '--runs_csv=',
  ]


def _plot_runs_args(tmp_path):
  _finished_shakespeare_run(tmp_path / 'run')
  return [
      'plot_runs.py',
      f'--run_dirs={tmp_path / "run"}',
      f'--output={tmp_path / "curves.png"}',
  ]


# Script -> (its command line in tmp_path, a line its stdout must hold).
# benchmark.py and benchmark_window.py: their runs in scripts_smoke_test.py
# (every row, the paired mode) check their stderr with `quiet_lines`.
_RUNS = {
    'benchmark_memory': (_benchmark_memory_args, '| tff_fedavg | 1 | 1 |'),
    'benchmark_scale': (_benchmark_scale_args, '| clients | s/round (loop) |'),
    'benchmark_leaf': (_benchmark_leaf_args, '| with --eval_per_client |'),
    'reproduce_papers': (_reproduce_papers_args, '| fedavg shakespeare W=10 |'),
    'plot_runs': (_plot_runs_args, 'Wrote '),
}


@pytest.mark.parametrize('script', sorted(_RUNS))
def test_script_prints_no_tensorflow_info_lines(tmp_path, script):
  args, expected = _RUNS[script]
  stdout, stderr = _run(*args(tmp_path))
  assert expected in stdout, stdout[-3000:]
  quiet_lines.assert_quiet(stderr)


def test_verbosity_brings_the_info_lines_back(tmp_path):
  # The same run as the quiet benchmark.py case: grappler's sessions (TFF's
  # compiler in the driver) and TFF's absl INFO lines are back on stderr.
  stdout, stderr = _run(*_benchmark_args(tmp_path), '--verbosity=0')
  assert '| process | s/round |' in stdout, stdout[-3000:]
  assert quiet_lines.NATIVE_INFO.search(stderr), stderr[-3000:]
  assert 'grappler' in stderr, stderr[-3000:]
  assert quiet_lines.ABSL_INFO.search(stderr), stderr[-3000:]
