"""Helpers shared by the tests of tff_fedwin.training.loop.run_training.

The task is tests/softmax_task.py; the `processes` fixture (one process per
kind: 'fedavg', 'window', 'scaffold') is in tests/training/conftest.py.
"""

import csv
import os

import numpy as np

from tests import softmax_task as task
from tff_fedwin import round_runner
from tff_fedwin import training
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold


class Crash(Exception):
  """Simulates the process dying."""


class RecordingRunner(round_runner.ForwardingRunner):
  """Delegates to a runner; records every round; can die at a given round.

  The clients of a round are read from the data of its datasets.
  """

  def __init__(self, inner, crash_at_call=None):
    super().__init__(inner)
    self._crash_at_call = crash_at_call
    self.client_ids = []
    self.num_batches = []
    self.client_states_in = []
    self.client_states_out = []
    self.states = []

  def run_round(self, state, datasets, client_states):
    if len(self.client_ids) + 1 == self._crash_at_call:
      raise Crash()
    self.client_ids.append([task.client_of(ds) for ds in datasets])
    self.num_batches.append([sum(1 for _ in ds) for ds in datasets])
    self.client_states_in.append(client_states)
    state, new_client_states, metrics = self._inner.run_round(
        state, datasets, client_states
    )
    self.client_states_out.append(new_client_states)
    self.states.append(state)
    return state, new_client_states, metrics


def make_runner(processes, kind, crash_at_call=None):
  if kind == 'scaffold':
    inner = runners.ScaffoldRunner(
        processes[kind], scaffold.initial_client_state(task.model_fn)
    )
  else:
    inner = runners.LearningProcessRunner(processes[kind])
  return RecordingRunner(inner, crash_at_call)


def run(runner, directory, **overrides):
  kwargs = dict(
      train_client_data=task.CLIENT_DATA,
      preprocess_fn=task.preprocess_fn,
      clients_per_round=2,
      total_rounds=4,
      seed=5,
      evaluate_fn=task.evaluate_fn,
      rounds_per_eval=1,
      rounds_per_checkpoint=2,
      output_dir=str(directory),
      experiment_name='exp',
  )
  kwargs.update(overrides)
  return training.run_training(runner, **kwargs)


def read_csv(output_dir, experiment_name='exp'):
  path = os.path.join(str(output_dir), experiment_name, 'metrics.csv')
  with open(path, newline='') as f:
    return sorted(csv.DictReader(f), key=lambda row: int(row['round_num']))


def _expected_summary(rows, last_n):
  eval_rows = [row for row in rows if row['window/accuracy'] != ''][-last_n:]
  expected = {}
  for prefix in ('window', 'global'):
    for name in ('accuracy', 'loss'):
      values = np.array([float(row[f'{prefix}/{name}']) for row in eval_rows])
      expected[prefix, name] = (np.mean(values), np.std(values))
  return [int(row['round_num']) for row in eval_rows], expected


def assert_summary(summary, rows, last_n):
  eval_rounds, expected = _expected_summary(rows, last_n)
  assert summary['eval_rounds'] == eval_rounds
  for (prefix, name), (mean, std) in expected.items():
    np.testing.assert_allclose(summary[prefix][name]['mean'], mean, rtol=1e-12)
    np.testing.assert_allclose(
        summary[prefix][name]['std'], std, rtol=1e-12, atol=1e-15
    )
