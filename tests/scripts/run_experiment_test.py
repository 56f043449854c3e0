"""Smoke tests of scripts/run_experiment.py: flags -> main -> metrics.csv.

Every task runs one round with two clients through `main`, the flags set with
`flagsaver`; its CSV row, summary.json and printed summary must agree with each
other (round 1 is the last round, so it is evaluated). Bad flag values must
stop `main` with an `app.UsageError` that names the flag, before any TFF work
(`--workers` is refused when it is set).
The script's entry point turns usage and user errors into one line and exit
code 1 (what a user sees is in run_experiment_cli_test.py).
"""

import csv
import importlib.util
import json
import os
import re

from absl import app
from absl import flags
from absl.testing import flagsaver
import pytest

from tests.data import leaf_fixtures
from tests.experiments import session_worker
from tff_fedwin import runtime
from tff_fedwin.data import leaf
from tff_fedwin.tasks import registry
from tff_fedwin.training import checkpoints
from tff_fedwin.training import divergence

_SCRIPT = os.path.join(
    os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ),
    'scripts',
    'run_experiment.py',
)


def _load_script():
  spec = importlib.util.spec_from_file_location(
      'run_experiment_script', _SCRIPT
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)  # Defines the flags: once per session.
  return module


run_experiment = _load_script()
if not flags.FLAGS.is_parsed():
  flags.FLAGS(['run_experiment'])


# One round, two clients; the output directory is added by the test.
TASK_FLAGS = {
    'mnist': dict(task='mnist', num_clients=10, client_batch_size=20),
    'npz': dict(task='npz', num_clients=4, client_batch_size=10, window_size=1),
    'emnist': dict(
        task='emnist', use_synthetic_data=True, client_batch_size=10
    ),
    'stackoverflow': dict(
        task='stackoverflow', use_synthetic_data=True, client_batch_size=4
    ),
    'shakespeare': dict(task='shakespeare', client_batch_size=4),
}


@pytest.mark.parametrize('task', sorted(TASK_FLAGS))
def test_main_writes_one_round_of_metrics(
    task, tmp_path, request, capsys, tff_execution_context
):
  values = dict(
      TASK_FLAGS[task],
      clients_per_round=2,
      total_rounds=1,
      root_output_dir=str(tmp_path),
      experiment_name=task,
  )
  if task == 'npz':
    values['data_npz'] = request.getfixturevalue('data_npz')
  # On the session's TFF worker (tests/experiments/session_worker.py): the
  # script's own worker start is the subprocess tests' (run_experiment_cli_test).
  with (
      flagsaver.flagsaver(**values),
      session_worker.local_runs_on(tff_execution_context),
  ):
    run_experiment.main(['run_experiment'])
  printed = capsys.readouterr().out.splitlines()
  with open(tmp_path / task / 'metrics.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  with open(tmp_path / task / 'summary.json') as f:
    summary = json.load(f)

  assert [row['round_num'] for row in rows] == ['1']
  row = rows[0]
  assert summary['eval_rounds'] == [1]
  assert summary['rounds_in_csv'] == 1
  assert summary['total_round_and_eval_time_seconds'] == pytest.approx(
      float(row['round_time_seconds']) + float(row['eval_time_seconds'])
  )
  for model in ('window', 'global'):
    for metric in ('accuracy', 'loss'):
      value = float(row[f'{model}/{metric}'])
      assert summary[model][metric] == {
          'mean': value,
          'std': 0.0,
          'values': [value],
      }
  # The window's figures are printed only when there is a window (npz here).
  has_window = values.get('window_size', 0) > 0
  assert summary['has_window'] is has_window
  window_text = (
      f'window {float(row["window/accuracy"]):.4f} +- 0.0000, '
      if has_window
      else ''
  )
  assert (
      f'  accuracy: {window_text}global {float(row["global/accuracy"]):.4f} '
      '+- 0.0000'
  ) in printed
  assert 0.0 <= float(row['global/accuracy']) <= 1.0
  assert float(row['global/loss']) > 0.0


def _bad(flag, **values):
  return pytest.param(values, flag, id=flag.lstrip('-'))


@pytest.mark.parametrize(
    'values, flag',
    [
        _bad(
            '--window_start_round',
            window_size=2,
            window_start_round=3,
            total_rounds=2,
        ),
        _bad('--clients_per_round', num_clients=3, clients_per_round=4),
        _bad(
            '--window_read_every',
            window_size=2,
            window_mode='broadcast',
            window_read_every=2,
        ),
        _bad('--data_npz', task='npz'),
        _bad('--client_loss', task='shakespeare', client_loss='wsm'),
        _bad(
            '--client_lr_schedule',
            algorithm='mime_lite',
            client_lr_schedule='ima',
        ),
        _bad('--client_learning_rate', client_learning_rate=0.0),
        _bad('--window_size', window_size=3, total_rounds=2),
        _bad(
            '--window_read_every',
            algorithm='scaffold',
            window_size=2,
            window_read_every=2,
            rounds_per_eval=2,
            total_rounds=2,
        ),
        _bad('--experiment_name', experiment_name='a/b'),
    ],
)
def test_main_rejects_bad_flag_values(values, flag, tmp_path):
  with flagsaver.flagsaver(root_output_dir=str(tmp_path), **values):
    with pytest.raises(app.UsageError, match=flag):
      run_experiment.main(['run_experiment'])
  assert not os.listdir(tmp_path)  # Nothing ran.


@pytest.mark.parametrize('workers', ['localhost', 'host:99999', 'host:0'])
def test_workers_flag_rejects_bad_addresses_when_set(workers):
  # Rejected by the flag's validator, i.e. at flag parsing, before `main`.
  with pytest.raises(flags.IllegalFlagValueError, match='--workers'):
    with flagsaver.flagsaver(workers=workers):
      pass


def test_main_rejects_positional_arguments(tmp_path):
  with flagsaver.flagsaver(root_output_dir=str(tmp_path), total_rounds=1):
    with pytest.raises(app.UsageError, match='extra'):
      run_experiment.main(['run_experiment', 'extra'])


@pytest.mark.parametrize(
    'error',
    [
        run_experiment.experiments.InputDataError('d.npz: no such file.'),
        registry.DataUnavailableError('Task emnist: downloading failed.'),
        runtime.WorkerConfinementError('TFF worker pid 1 listens on 0.0.0.0.'),
        divergence.TrainingDivergedError(
            'e: loss is nan at round 3.', 3, 'loss', float('nan')
        ),
        # One line since tff_fedwin.errors (were tracebacks after
        # TensorFlow loaded, or printed short only as a CheckpointMismatch).
        leaf.LeafDataError('d/train/a.json: user u: x row 0 has 3 values'),
        checkpoints.DiskFullError('No space left writing metrics.csv.'),
        checkpoints.NoIntactCheckpointError('No checkpoint in c is intact.'),
    ],
    ids=lambda e: type(e).__name__,
)
def test_user_errors_exit_with_their_one_line(
    error, monkeypatch, keep_log_levels
):
  del keep_log_levels

  def fail(config):
    del config
    raise error

  monkeypatch.setattr(run_experiment.experiments, 'run_experiment', fail)
  with pytest.raises(SystemExit) as exited:
    run_experiment._with_one_line_errors(
        run_experiment.main, 'run_experiment.py'
    )(['/x/run_experiment.py'])
  assert exited.value.code == f'run_experiment.py: {error}'


def test_usage_error_exits_with_one_line_and_hint(keep_log_levels):
  del keep_log_levels
  with flagsaver.flagsaver(total_rounds=0):
    with pytest.raises(SystemExit) as exited:
      run_experiment._with_one_line_errors(
          run_experiment.main, 'run_experiment.py'
      )(['/x/run_experiment.py'])
  assert exited.value.code == (
      'run_experiment.py: --total_rounds must be an integer >= 1, got 0.\n'
      'Pass --helpshort or --helpfull to see help on flags.'
  )


_README = os.path.join(os.path.dirname(os.path.dirname(_SCRIPT)), 'README.md')
# One command: the script, then its arguments up to `&&` or the line's end
# (a `\` continues the line).
_README_COMMAND = re.compile(
    r'\.venv/bin/python scripts/run_experiment\.py((?:[^&\n\\]|\\\n)*)'
)


def _readme_commands():
  with open(_README) as f:
    text = f.read()
  return [
      m.group(1).replace('\\\n', ' ').split()
      for m in _README_COMMAND.finditer(text)
  ]


def test_readme_commands_pass_the_scripts_checks(tmp_path):
  # Every run_experiment.py command of the README, as printed, through the
  # script's own flag parsing and its checks of flags and data files (the
  # runs themselves are the task tests'). $LEAF's FEMNIST is a LEAF
  # directory of 10 users (the README's default --clients_per_round).
  commands = _readme_commands()
  assert [c[0] for c in commands] == [
      '--task=mnist',
      '--task=leaf',
      '--task=text',
  ]
  users = {
      f'f{u}': (leaf_fixtures.femnist_rows(2, u), [u, u]) for u in range(10)
  }
  leaf_dir = leaf_fixtures.write_leaf_dir(
      tmp_path / 'LEAF' / 'data' / 'femnist' / 'data',
      {'a.json': users},
      {'a.json': users},
  )
  for args in commands:
    args = [a.replace('$LEAF/data/femnist/data', leaf_dir) for a in args]
    with flagsaver.flagsaver():
      flags.FLAGS(['run_experiment', *args, f'--cache_dir={tmp_path}'])
      config = run_experiment.checked_config(['run_experiment'])
    assert config.task == args[0].split('=')[1]
