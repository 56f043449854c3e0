"""Tests for tff_fedwin.log_levels."""

import logging
import os
import subprocess
import sys

from absl import logging as absl_logging
import pytest

from tff_fedwin import log_levels


@pytest.mark.parametrize(
    'args, expected',
    [
        ([], False),
        (['--task=mnist'], False),
        (['--verbose_name=x', '--vv=1', '-vx'], False),
        (['--verbosity=1'], True),
        (['--verbosity', '0'], True),
        (['-v=2'], True),
        (['-v', '1'], True),
        (['--v=1'], True),
    ],
)
def test_verbosity_requested(args, expected):
  assert log_levels.verbosity_requested(['prog', *args]) == expected


def test_quiet_native_logs_silences_tensorflow_and_grpc(monkeypatch):
  monkeypatch.delenv('TF_CPP_MIN_LOG_LEVEL', raising=False)
  monkeypatch.delenv('GRPC_VERBOSITY', raising=False)
  log_levels.quiet_native_logs(['prog'])
  assert os.environ['TF_CPP_MIN_LOG_LEVEL'] == '3'
  assert os.environ['GRPC_VERBOSITY'] == 'ERROR'


@pytest.mark.parametrize(
    'env, argv',
    [
        ('0', ['prog']),  # The user's environment wins.
        (None, ['prog', '--verbosity=0']),  # Asked for logs.
    ],
)
def test_quiet_native_logs_leaves_users_choice(monkeypatch, env, argv):
  monkeypatch.delenv('GRPC_VERBOSITY', raising=False)
  if env is None:
    monkeypatch.delenv('TF_CPP_MIN_LOG_LEVEL', raising=False)
  else:
    monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', env)
  log_levels.quiet_native_logs(argv)
  assert os.environ.get('TF_CPP_MIN_LOG_LEVEL') == env


@pytest.mark.parametrize(
    'verbosity_set, absl_level, tf_level',
    [
        (False, absl_logging.WARNING, logging.WARNING),
        (True, absl_logging.DEBUG, logging.DEBUG),  # Left as they were.
    ],
)
def test_set_python_log_levels(
    keep_log_levels, verbosity_set, absl_level, tf_level
):
  del keep_log_levels
  absl_logging.set_verbosity(absl_logging.DEBUG)
  logging.getLogger('tensorflow').setLevel(logging.DEBUG)
  log_levels.set_python_log_levels(verbosity_set)
  assert absl_logging.get_verbosity() == absl_level
  assert logging.getLogger('tensorflow').level == tf_level


@pytest.mark.parametrize('user_env', [None, '1'])
def test_quiet_is_the_scripts_defaults_for_library_use(
    monkeypatch, keep_log_levels, user_env
):
  del keep_log_levels
  monkeypatch.delenv('GRPC_VERBOSITY', raising=False)
  if user_env is None:
    monkeypatch.delenv('TF_CPP_MIN_LOG_LEVEL', raising=False)
  else:
    monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', user_env)
  absl_logging.set_verbosity(absl_logging.DEBUG)
  logging.getLogger('tensorflow').setLevel(logging.DEBUG)
  log_levels.quiet()
  assert os.environ['TF_CPP_MIN_LOG_LEVEL'] == (user_env or '3')
  assert os.environ['GRPC_VERBOSITY'] == 'ERROR'
  assert absl_logging.get_verbosity() == absl_logging.WARNING
  assert logging.getLogger('tensorflow').level == logging.WARNING


# A script's main: prints the log levels it runs at and its arguments.
_SCRIPT = """
import logging
from absl import logging as absl_logging
from tff_fedwin import log_levels

def main(argv):
  tf_level = logging.getLogger('tensorflow').level
  print(absl_logging.get_verbosity(), tf_level, argv[1:])
  return 3

log_levels.run(main)
"""


@pytest.mark.parametrize(
    'flags, expected',
    [
        # Without the run, absl would be at 0 (INFO) once flags are parsed.
        ([], f"{absl_logging.WARNING} {logging.WARNING} ['x']"),
        # absl's flag rules; the tensorflow logger is untouched (NOTSET).
        (['--verbosity=1'], f"1 {logging.NOTSET} ['x']"),
    ],
)
def test_run_sets_python_log_levels_before_main(tmp_path, flags, expected):
  script = tmp_path / 'script.py'
  script.write_text(_SCRIPT)
  result = subprocess.run(
      [sys.executable, str(script), *flags, 'x'],
      capture_output=True,
      text=True,
      timeout=120,
      check=False,
  )
  assert result.returncode == 3, result.stderr  # main's result is the code.
  assert result.stdout.strip() == expected
