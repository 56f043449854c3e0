"""scripts/run_experiment.py as a user runs it: its own process, its outputs.

Shared by the tests that start the script as a subprocess (run directories,
workers on other hosts): the command line from flag values, the environment
without the test session's quiet-log settings, and metrics.csv's rows without
the time columns.
"""

import csv
import os
import subprocess
import sys

from tff_fedwin import log_levels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_EXPERIMENT = os.path.join(ROOT, 'scripts', 'run_experiment.py')


def command(**flags) -> list[str]:
  """`python scripts/run_experiment.py --flag=value ...`."""
  return [sys.executable, RUN_EXPERIMENT] + [
      f'--{k}={v}' for k, v in flags.items()
  ]


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
