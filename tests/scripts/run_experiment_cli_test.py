"""scripts/run_experiment.py as a user runs it: its exit code and every line.

Each test starts the script in its own process. A user's mistake gets one line
naming the flag or file (every problem of the flags its own line, plus absl's
help hint) and exit code 1, before any worker starts or output is written; a
good run prints where its outputs go, its progress lines and the summary, none
of TensorFlow's INFO logs, and no exit traceback.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from tff_fedwin import log_levels

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_SCRIPT = os.path.join(_ROOT, 'scripts', 'run_experiment.py')
_HINT = 'Pass --helpshort or --helpfull to see help on flags.'
# A TF C++ log line starts with its date: "2026-11-23 13:17:28.896122: I ...".
_NATIVE_LOG_MARKS = ('tensorflow/core', 'tensorflow/tsl', 'cuda_', 'oneDNN')


def _run(tmp_path, *args, env_update=None):
  env = dict(os.environ)
  for name in log_levels.QUIET_NATIVE_ENV:  # The script's own defaults.
    env.pop(name, None)
  env.update(env_update or {})
  result = subprocess.run(
      [sys.executable, _SCRIPT, f'--root_output_dir={tmp_path / "out"}', *args],
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
      env=env,
      cwd=_ROOT,
  )
  return result


def _npz_flags(path, name='run', **overrides):
  values = dict(
      task='npz',
      data_npz=path,
      num_clients=4,
      clients_per_round=2,
      total_rounds=2,
      rounds_per_eval=1,
      client_batch_size=10,
      experiment_name=name,
  )
  values.update(overrides)
  return [f'--{key}={value}' for key, value in values.items()]


@pytest.mark.parametrize(
    'args, message',
    [
        (
            ['--total_rounds=0'],
            'run_experiment.py: --total_rounds must be an integer >= 1, got 0.',
        ),
        (
            ['--experiment_name=a/b'],
            'run_experiment.py: --experiment_name must '
            'be one directory name (no "/", not "." or ".."); got \'a/b\'.',
        ),
        (
            ['--window_size=30', '--total_rounds=20'],
            'run_experiment.py: --window_size (30) must be <= --total_rounds (20): '
            'the window model is active from round max(W, --window_start_round) '
            'on, so it would never be used.',
        ),
    ],
)
def test_bad_flag_value_is_one_line_and_hint(tmp_path, args, message):
  result = _run(tmp_path, *args)
  assert result.returncode == 1
  assert result.stderr.splitlines() == [message, _HINT]
  assert result.stdout == ''
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('workers', ['host:99999', 'host:0', 'my host:80'])
def test_bad_workers_rejected_at_flag_parsing(tmp_path, workers):
  result = _run(tmp_path, f'--workers={workers}')
  assert result.returncode == 1
  lines = result.stderr.splitlines()
  assert len(lines) == 2 and lines[1] == _HINT
  assert lines[0].startswith(
      f'FATAL Flags parsing error: flag --workers={workers}: --workers must '
      'be empty, an integer >= 1 or a comma list of host:port with ports '
      '1-65535'
  )


def test_missing_npz_is_one_line_naming_the_flag_and_file(tmp_path):
  missing = tmp_path / 'nowhere.npz'
  result = _run(tmp_path, *_npz_flags(str(missing)))
  assert result.returncode == 1
  assert result.stderr.splitlines() == [
      'run_experiment.py: --data_npz must name a .npz file holding x_train, '
      f'y_train, x_test and y_test; {missing}: no such file.'
  ]
  assert not (tmp_path / 'out').exists()


def test_run_prints_progress_and_summary_only(tmp_path, data_npz):
  result = _run(tmp_path, *_npz_flags(data_npz, window_size=2))
  assert result.returncode == 0, result.stderr[-3000:]
  # Where the outputs go, first (the run directory's absolute path).
  first, *lines = result.stdout.splitlines()
  assert first == f'run: outputs in {tmp_path / "out" / "run"}'
  assert [line.split(' ')[2] for line in lines[:2]] == ['1/2', '2/2']
  assert all(line.startswith('run: round ') for line in lines[:2])
  assert lines[2].startswith('run: 2 rounds, ')
  assert [line.split(':')[0] for line in lines[3:]] == [
      '  accuracy',
      '  loss',
      '  outputs',
  ]
  output = result.stdout + result.stderr
  for mark in (
      *_NATIVE_LOG_MARKS,
      'Exception ignored',
      'Traceback',
      'INFO:tensorflow',
      'Starting new session',
  ):
    assert mark not in output, mark


def test_verbosity_brings_logs_back(tmp_path, data_npz):
  result = _run(
      tmp_path, *_npz_flags(data_npz, total_rounds=1), '--verbosity=0'
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'checkpoint of round 1 saved' in result.stderr
  assert any(mark in result.stderr for mark in _NATIVE_LOG_MARKS)


def test_diverging_run_stops_with_one_line(tmp_path, data_npz):
  result = _run(
      tmp_path,
      *_npz_flags(
          data_npz,
          client_learning_rate=1e30,
          total_rounds=3,
          rounds_per_checkpoint=1,
      ),
  )
  assert result.returncode == 1
  lines = result.stderr.splitlines()
  assert len(lines) == 1, result.stderr
  assert ' at round ' in lines[0] and 'learning rate' in lines[0]


# Runs the script as `__main__` and prints which heavy modules it imported.
_HEAVY_MODULES_PROBE = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
  runpy.run_path(sys.argv[0], run_name='__main__')
finally:
  heavy = ('tensorflow', 'tensorflow_federated', 'numpy')
  print(sorted(name for name in heavy if name in sys.modules))
"""


def _run_probed(*args, script=_SCRIPT):
  """The script with `args` under `_HEAVY_MODULES_PROBE`."""
  return subprocess.run(
      [sys.executable, '-c', _HEAVY_MODULES_PROBE, script, *args],
      capture_output=True,
      text=True,
      timeout=120,
      check=False,
      cwd=_ROOT,
  )


@pytest.mark.parametrize(
    'args, first_line',
    [
        (
            ['--windw_size=10'],
            "FATAL Flags parsing error: Unknown command line flag 'windw_size'",
        ),
        (
            ['--total_rounds=0'],
            'run_experiment.py: --total_rounds must be an integer >= 1, got 0.',
        ),
        (
            ['--task=shakespeare', '--client_loss=wsm'],
            'run_experiment.py: --client_loss=wsm needs one label per example',
        ),
        (
            ['--workers=host:0'],
            'FATAL Flags parsing error: flag --workers=host:0: --workers must',
        ),
        (
            ['--task=leaf'],
            'run_experiment.py: --data_dir is required with --task=leaf.',
        ),
    ],
)
def test_bad_flags_are_refused_before_tensorflow_is_imported(
    tmp_path, args, first_line
):
  result = _run_probed(*args)
  assert result.returncode == 1
  assert result.stderr.splitlines()[0].startswith(first_line), result.stderr
  assert result.stdout == '[]\n'


def test_every_problem_of_the_flags_is_one_line_before_tensorflow():
  # Three problems of one command line, each its own line, in one run: W >
  # the rounds, the default --rounds_per_eval=5 not a multiple of E = 2, and
  # broadcast with E != 1.
  result = _run_probed(
      '--window_size=60',
      '--total_rounds=50',
      '--window_mode=broadcast',
      '--window_read_every=2',
  )
  assert result.returncode == 1
  assert result.stderr.splitlines() == [
      'run_experiment.py: --window_size (60) must be <= --total_rounds (50): '
      'the window model is active from round max(W, --window_start_round) '
      'on, so it would never be used.',
      'run_experiment.py: --rounds_per_eval (5) and --total_rounds (50) must '
      'be multiples of --window_read_every (2): the window model exists only '
      'at those rounds.',
      'run_experiment.py: --window_read_every must be 1 with '
      '--window_mode=broadcast.',
      _HINT,
  ]
  assert result.stdout == '[]\n'


def test_benchmark_refuses_a_bad_flag_before_tensorflow_is_imported():
  # scripts/benchmark.py checks its rows in `log_levels.run`'s
  # `before_tensorflow`, which `log_levels.run` imports TensorFlow after.
  result = _run_probed(
      '--rounds=0', script=os.path.join(_ROOT, 'scripts', 'benchmark.py')
  )
  assert result.returncode == 1
  assert result.stderr.splitlines() == ['benchmark.py: --rounds must be >= 1.']
  assert result.stdout == '[]\n'


def _bad_data_file(tmp_path, kind):
  """Flags naming a malformed data file of `kind`, and its one-line error."""
  if kind == 'npz':
    path = tmp_path / 'no_test.npz'
    np.savez(path, x_train=np.zeros((4, 2)), y_train=np.zeros(4, int))
    return [f'--data_npz={path}'], (
        f'{path} lacks the array(s) x_test, y_test; a data file needs '
        'x_train, y_train, x_test, y_test.'
    )
  if kind == 'npz_bomb':  # 1 MiB of zeros in a kilobyte, over a 64 KiB cap.
    path = tmp_path / 'bomb.npz'
    x, y = np.zeros((4, 2**18), np.uint8), np.zeros(4, int)
    np.savez_compressed(path, x_train=x, y_train=y, x_test=x, y_test=y)
    return [f'--data_npz={path}', '--max_npz_bytes=65536'], (
        f'x_train in {path}: decompresses to 1,048,704 bytes (with the arrays '
        'before it), beyond the cap of 65,536 bytes (--max_npz_bytes, '
        "load_npz's max_bytes; by default 0.5 of the available memory); raise "
        'it if the machine has the memory.'
    )
  if kind == 'leaf_deep':
    for split in ('train', 'test'):
      (tmp_path / 'leaf' / split).mkdir(parents=True)
      (tmp_path / 'leaf' / split / 'a.json').write_text('[' * 100_000)
    path = tmp_path / 'leaf' / 'train' / 'a.json'
    return [
        f'--data_dir={tmp_path / "leaf"}',
        f'--cache_dir={tmp_path / "cache"}',
    ], (
        f"{path}: invalid JSON: nested too deeply (Python's parser stops at "
        f'its recursion limit, {sys.getrecursionlimit()} levels; data files '
        'nest a few)'
    )
  if kind == 'jsonl_huge':
    path = tmp_path / 'data.jsonl'
    path.write_text('{"client_id": "a", "text": "x", "n": ' + '7' * 5000 + '}')
    return [f'--data_jsonl={path}'], (
        f'{path}, line 1: invalid JSON: an integer of more than 4300 digits '
        "(Python's limit on integers read from text)."
    )
  if kind == 'leaf':
    (tmp_path / 'leaf' / 'train').mkdir(parents=True)
    (tmp_path / 'leaf' / 'test').mkdir()
    return [
        f'--data_dir={tmp_path / "leaf"}',
        f'--cache_dir={tmp_path / "cache"}',
    ], f'{tmp_path / "leaf" / "train"}: holds no .json file'
  if kind == 'clients':  # A good file with 5 clients, 10 per round asked.
    path = os.path.join(_ROOT, 'tff_fedwin/data/samples/text_sample.jsonl')
    return [f'--data_jsonl={path}', '--clients_per_round=10'], (
        '--clients_per_round (10) must be <= the number of training clients '
        'of --task=text (5).'
    )
  path = tmp_path / 'data.jsonl'
  path.write_text('{"client_id": "a"}\n')
  return [f'--data_jsonl={path}'], f'{path}, line 1: missing field "text".'


@pytest.mark.parametrize(
    'task, kind',
    [
        ('npz', 'npz'),
        ('leaf', 'leaf'),
        ('text', 'text'),
        ('text', 'clients'),
        ('npz', 'npz_bomb'),
        ('leaf', 'leaf_deep'),
        ('text', 'jsonl_huge'),
    ],
)
def test_bad_data_files_are_refused_before_tensorflow_is_imported(
    tmp_path, task, kind
):
  flags, message = _bad_data_file(tmp_path, kind)
  result = _run_probed(
      f'--task={task}', *flags, f'--root_output_dir={tmp_path / "out"}'
  )
  assert result.returncode == 1
  assert result.stderr.splitlines() == [f'run_experiment.py: {message}']
  assert result.stdout == "['numpy']\n"  # Read by numpy, without TensorFlow.
  assert not (tmp_path / 'out').exists()


def test_recurrent_task_runs_from_the_command_line(tmp_path):
  # An LSTM built after absl's init with TensorFlow imported late failed in
  # the script only ("'SymbolicTensor' object cannot be interpreted as an
  # integer", tff_fedwin/log_levels.py); in-process runs never showed it.
  # LEAF's own by-user output (tests/data/leaf_generated): its curly
  # apostrophe is in the x of 80 windows and the y of one.
  data_dir = os.path.join(_ROOT, 'tests', 'data', 'leaf_generated')
  result = _run(
      tmp_path,
      '--task=leaf',
      f'--data_dir={os.path.join(data_dir, "shakespeare_user")}',
      f'--cache_dir={tmp_path / "cache"}',
      '--clients_per_round=1',
      '--client_batch_size=128',
      '--total_rounds=1',
      '--experiment_name=leaf',
  )
  assert result.returncode == 0, result.stderr[-3000:]
  warnings = [line for line in result.stderr.splitlines() if 'LEAF' in line]
  assert len(warnings) == 1, result.stderr[-3000:]
  assert warnings[0].endswith(
      'shakespeare_user: 80 x character(s) and 1 y character(s) are outside '
      "LEAF's Shakespeare ALL_LETTERS: read as LEAF's reader reads them (x: "
      "find() = -1, id 0; y: the one-hot at index -1, '}')"
  )
  assert 'Traceback' not in result.stderr
  first, second = result.stdout.splitlines()[:2]
  assert first == f'leaf: outputs in {tmp_path / "out" / "leaf"}'
  assert second.startswith('leaf: round 1/1 ')
