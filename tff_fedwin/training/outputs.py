"""The files of one run: names, paths, the CSV summary and atomic JSON.

Under `output_dir/experiment_name/`: `metrics.csv` (one row per round, key
column `round_num`), `tensorboard/`, `summary.json`, `checkpoints/` and,
when each test client is evaluated, `per_client_metrics.csv`
(docs/design.md sec. 5).
"""

import collections
import csv
import json
import os
import re
from typing import Any, Optional

import numpy as np

from tff_fedwin import checks
from tff_fedwin.training import client_states

CHECKPOINT_DIR = 'checkpoints'
METRICS_CSV = 'metrics.csv'
# One row per (eval round, test client), with `--eval_per_client`
# (`per_client_csv`).
PER_CLIENT_CSV = 'per_client_metrics.csv'
TENSORBOARD_DIR = 'tensorboard'
SUMMARY_JSON = 'summary.json'
# A forked run's trunk and fork round (`tff_fedwin.training.forks`).
FORK_JSON = 'forked_from.json'
# SCAFFOLD's round client state files (client_state_transfer 'files').
CLIENT_STATE_FILES_DIR = 'client_state_files'
# The server state between rounds (server_state_transfer 'files').
SERVER_STATE_FILES_DIR = 'server_state_files'
# The training examples as a tensor bundle (client_data_transfer 'files').
CLIENT_DATA_DIR = 'client_data'
ROUND_KEY = 'round_num'
ROUND_TIME_KEY = 'round_time_seconds'
EVAL_TIME_KEY = 'eval_time_seconds'
TRAIN_PREFIX = 'train'
WINDOW_PREFIX = 'window'
GLOBAL_PREFIX = 'global'
# Columns of the round's raw aggregate w^t under a window in 'broadcast' mode
# (IMA), where `global/` is the window model m^t sent to the clients
# (`tff_fedwin.algorithms.extra_windows.AGGREGATE_NAME`).
AGGREGATE_PREFIX = 'aggregate'
# Columns of extra windows on the same trajectory (`window_<W>/<metric>`, as
# named by `tff_fedwin.algorithms.program_window_runner.extra_window_name`).
EXTRA_WINDOW_PREFIX = re.compile(r'window_([1-9][0-9]*)')


# One directory name, no path separators (`checks`, for the flag checks).
is_directory_name = checks.is_directory_name


class RunPaths:
  """The files of one experiment under `output_dir/experiment_name`."""

  def __init__(self, output_dir: str, experiment_name: str):
    self.root = os.path.join(os.fspath(output_dir), experiment_name)
    self.checkpoints = os.path.join(self.root, CHECKPOINT_DIR)
    self.metrics_csv = os.path.join(self.root, METRICS_CSV)
    self.per_client_csv = os.path.join(self.root, PER_CLIENT_CSV)
    self.tensorboard = os.path.join(self.root, TENSORBOARD_DIR)
    self.summary_json = os.path.join(self.root, SUMMARY_JSON)
    self.fork_json = os.path.join(self.root, FORK_JSON)
    self.client_state_files = os.path.join(self.root, CLIENT_STATE_FILES_DIR)
    self.server_state_files = os.path.join(self.root, SERVER_STATE_FILES_DIR)
    self.client_data = os.path.join(self.root, CLIENT_DATA_DIR)


def write_json_atomically(value: Any, path: str) -> None:
  """Writes `value` as indented JSON; readers see the old or the new file."""

  def write(f):
    json.dump(value, f, indent=2, sort_keys=True)
    f.write('\n')

  client_states.atomic_write(path, write, binary=False)


def _float_or_none(text: Optional[str]) -> Optional[float]:
  if text is None or text == '':
    return None
  return float(text)


def _read_rows(csv_path: str, last_round: int) -> list[dict[str, str]]:
  """The CSV's rows up to `last_round`, sorted by round."""
  rows = []
  if os.path.exists(csv_path):
    with open(csv_path, newline='') as f:
      rows = [
          row for row in csv.DictReader(f) if int(row[ROUND_KEY]) <= last_round
      ]
  rows.sort(key=lambda row: int(row[ROUND_KEY]))
  return rows


def _metric_stats(eval_rows, prefix: str):
  """`{metric: {mean, std, values}}` of the `prefix/` columns of `eval_rows`."""
  per_metric = collections.OrderedDict()
  names = sorted(
      {
          key[len(prefix) + 1 :]
          for row in eval_rows
          for key in row
          if key.startswith(prefix + '/')
      }
  )
  for name in names:
    values = np.array(
        [float(row[f'{prefix}/{name}']) for row in eval_rows], np.float64
    )
    per_metric[name] = collections.OrderedDict(
        mean=float(np.mean(values)),
        std=float(np.std(values)),
        values=values.tolist(),
    )
  return per_metric


def summarize_csv(
    csv_path: str, *, last_n: int, last_round: int
) -> dict[str, Any]:
  """Mean and std of every eval metric over the last `last_n` eval rounds.

  Rows after `last_round` (left by a longer run that died) are ignored.

  Returns:
    `window` and `global` (each `{metric: {mean, std, values}}`, population
    std), `eval_rounds`, `rounds_in_csv` and
    `total_round_and_eval_time_seconds` (summed over the rows).
  """
  rows = _read_rows(csv_path, last_round)
  eval_rows = [
      row
      for row in rows
      if any(
          key.startswith(WINDOW_PREFIX + '/') and value not in (None, '')
          for key, value in row.items()
      )
  ][-last_n:]
  summary = collections.OrderedDict()
  for prefix in (WINDOW_PREFIX, GLOBAL_PREFIX):
    summary[prefix] = _metric_stats(eval_rows, prefix)
  summary['eval_rounds'] = [int(row[ROUND_KEY]) for row in eval_rows]
  summary['rounds_in_csv'] = len(rows)
  summary['total_round_and_eval_time_seconds'] = float(
      sum(
          _float_or_none(row.get(key)) or 0.0
          for row in rows
          for key in (ROUND_TIME_KEY, EVAL_TIME_KEY)
      )
  )
  return summary
