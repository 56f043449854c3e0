"""scripts/run_experiment.py as a user runs it: its own process, its outputs.

Shared by the tests that start the script as a subprocess (run directories,
workers on other hosts): the command line from flag values, the environment
without the test session's quiet-log settings, and metrics.csv's rows without
the time columns; and the same flags run in this process
(`run_in_process`), for the runs whose only check is their numbers (the
uninterrupted references the subprocess cases compare against).
"""

import csv
import os
import subprocess
import sys
from typing import Any, Optional

import attrs

from tff_fedwin import experiments
from tff_fedwin import log_levels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_EXPERIMENT = os.path.join(ROOT, 'scripts', 'run_experiment.py')


def flag_args(**flags) -> list[str]:
  """`['--flag=value', ...]`: the script's arguments (`run_in_process`'s)."""
  return [f'--{k}={v}' for k, v in flags.items()]


def command(**flags) -> list[str]:
  """`python scripts/run_experiment.py --flag=value ...`."""
  return [sys.executable, RUN_EXPERIMENT] + flag_args(**flags)


def env() -> dict[str, str]:
  """This process's environment minus the quiet-log variables, so the
  script sets its own defaults as it does for a user."""
  environment = dict(os.environ)
  for name in log_levels.QUIET_NATIVE_ENV:
    environment.pop(name, None)
  return environment


def start(argv: list[str]) -> subprocess.Popen:
  """Starts `argv` in the background (stdout and stderr as text pipes)."""
  return subprocess.Popen(
      argv,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      env=env(),
      cwd=ROOT,
  )


def run(argv: list[str]) -> subprocess.CompletedProcess:
  """Runs `argv` to its end (10 minutes at most); output captured."""
  return subprocess.run(
      argv,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
      env=env(),
      cwd=ROOT,
  )


def rows(run_dir: str) -> list[dict[str, str]]:
  """metrics.csv's rows without the time columns."""
  with open(os.path.join(run_dir, 'metrics.csv'), newline='') as f:
    return [
        {k: v for k, v in row.items() if not k.endswith('_seconds')}
        for row in csv.DictReader(f)
    ]


def _flag_value(field: Any, text: str) -> Any:
  """`text` as the type of the `ExperimentConfig` field (`attrs` field)."""
  default = field.default
  if isinstance(default, bool):
    return {'true': True, 'false': False}[text.lower()]
  if isinstance(default, (int, float)):
    return type(default)(text)
  if field.type in (Optional[int], 'Optional[int]'):
    return int(text)  # An integer flag without a default.
  if field.type in (Optional[float], 'Optional[float]'):
    return float(text)  # A number flag unset by default (learning rates).
  return text  # str, or None for an optional path.


def config_from_args(args: list[str]) -> experiments.ExperimentConfig:
  """The `ExperimentConfig` that `run_experiment.py args` runs.

  Args:
    args: `--name=value` strings (`--noname` for a false boolean).
  """
  defaults = experiments.ExperimentConfig()
  values = {}
  for arg in args:
    name, has_value, text = arg[2:].partition('=')
    if not has_value and name.startswith('no'):
      name, text = name[2:], 'false'
    elif not has_value:
      text = 'true'
    values[name] = _flag_value(attrs.fields_dict(type(defaults))[name], text)
  return attrs.evolve(defaults, **values)


def run_in_process(args: list[str]) -> dict[str, Any]:
  """Runs `run_experiment.py args` in this process; its summary.

  For a run whose only check is its outputs: the same `run_experiment` as
  the script's `main`, without the interpreter and TensorFlow start of a
  subprocess (it starts its own TFF worker, as the script does).
  """
  return experiments.run_experiment(config_from_args(args))
