"""Tests for tff_fedwin.training.loop.run_training: metrics, summary, progress.

The task is tests/softmax_task.py. Expected values come from numpy
written here: the eval metrics from a numpy softmax on the recorded global
models, the summary from the CSV.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import softmax_task as task
from tests.training import loop_fixtures

evaluate_fn = task.evaluate_fn
_runner = loop_fixtures.make_runner
_run = loop_fixtures.run
_read_csv = loop_fixtures.read_csv
_assert_summary = loop_fixtures.assert_summary


@pytest.mark.parametrize(
    'total_rounds, rounds_per_eval, eval_rounds',
    [
        (5, 2, [2, 4, 5]),
        (3, 1, [1, 2, 3]),
        (2, 5, [2]),
    ],
)
def test_csv_has_a_row_per_round_and_eval_columns_on_eval_rounds(
    processes, tmp_path, total_rounds, rounds_per_eval, eval_rounds
):
  _run(
      _runner(processes, 'fedavg'),
      tmp_path,
      total_rounds=total_rounds,
      rounds_per_eval=rounds_per_eval,
  )

  rows = _read_csv(tmp_path)

  assert [int(row['round_num']) for row in rows] == list(
      range(1, total_rounds + 1)
  )
  eval_columns = (
      'window/accuracy',
      'window/loss',
      'global/accuracy',
      'global/loss',
      'eval_time_seconds',
  )
  for row in rows:
    float(row['round_time_seconds'])
    float(row['train/client_work/train/loss'])
    assert int(row['train/client_work/train/num_examples']) > 0
    is_eval_round = int(row['round_num']) in eval_rounds
    for column in eval_columns:
      assert (row[column] != '') == is_eval_round, (row['round_num'], column)


def test_eval_columns_are_evaluate_fn_of_window_and_global_models(
    processes, tmp_path
):
  runner = _runner(processes, 'window')

  _run(runner, tmp_path, total_rounds=3, rounds_per_eval=1)

  rows = _read_csv(tmp_path)
  global_kernels = [
      [np.asarray(w, np.float64) for w in s.global_model_weights.trainable]
      for s in runner.states
  ]
  for t, row in enumerate(rows, start=1):
    current = global_kernels[t - 1]
    # W = 2: the window model is w^1 at round 1, then (w^{t-1} + w^t) / 2.
    previous = global_kernels[t - 2] if t >= 2 else current
    window = [(a + b) / 2 for a, b in zip(previous, current)]
    expected_window = evaluate_fn(tff.learning.models.ModelWeights(window, []))
    expected_global = evaluate_fn(tff.learning.models.ModelWeights(current, []))
    for name in ('accuracy', 'loss'):
      np.testing.assert_allclose(
          float(row[f'window/{name}']), expected_window[name], rtol=1e-5
      )
      np.testing.assert_allclose(
          float(row[f'global/{name}']), expected_global[name], rtol=1e-5
      )
  assert float(rows[2]['window/loss']) != float(rows[2]['global/loss'])


@pytest.fixture(scope='module')
def finished_run(processes, tmp_path_factory):
  """A window run of 5 rounds with eval rounds 2, 4, 5 and its summary."""
  output_dir = tmp_path_factory.mktemp('finished')
  summary = _run(
      _runner(processes, 'window'),
      output_dir,
      total_rounds=5,
      rounds_per_eval=2,
      summary_last_n=2,
  )
  return output_dir, summary


def test_summary_is_mean_and_std_of_last_n_eval_rounds_in_csv(finished_run):
  output_dir, summary = finished_run

  _assert_summary(summary, _read_csv(output_dir), last_n=2)
  assert summary['eval_rounds'] == [4, 5]
  assert summary['wall_time_seconds'] > 0
  assert summary['resumed_from_round'] is None


def test_summary_is_written_as_json_next_to_the_csv(finished_run):
  output_dir, summary = finished_run

  with open(os.path.join(str(output_dir), 'exp', 'summary.json')) as f:
    written = json.load(f)

  assert written == json.loads(json.dumps(summary))


@pytest.mark.parametrize('last_n', [1, 3, 10])
def test_rerun_of_finished_run_summarizes_without_training(
    processes, finished_run, tmp_path, last_n
):
  source_dir, _ = finished_run
  shutil.copytree(str(source_dir), str(tmp_path), dirs_exist_ok=True)
  runner = _runner(processes, 'window')

  summary = _run(
      runner, tmp_path, total_rounds=5, rounds_per_eval=2, summary_last_n=last_n
  )

  assert runner.client_ids == []
  assert summary['resumed_from_round'] == 5
  _assert_summary(summary, _read_csv(tmp_path), last_n)


@pytest.mark.parametrize(
    'kind, has_window', [('fedavg', False), ('window', True)]
)
def test_progress_lines_at_first_and_eval_rounds(
    processes, tmp_path, capsys, kind, has_window
):
  # Rounds take well under PROGRESS_INTERVAL_SECONDS (30 s) here, so rounds
  # without an eval (3, 5) print nothing; round 6 is the last, evaluated.
  # Without a window (fedavg) its columns, equal to global's, are not shown;
  # metrics.csv has them either way.
  summary = _run(
      _runner(processes, kind), tmp_path, total_rounds=6, rounds_per_eval=2
  )
  lines = [
      l
      for l in capsys.readouterr().out.splitlines()
      if l.startswith('exp: round ')
  ]
  assert [l.split()[2] for l in lines] == ['1/6', '2/6', '4/6', '6/6']
  assert 'global/accuracy' not in lines[0]
  assert all('global/accuracy' in l for l in lines[1:])
  assert [('window/accuracy' in l) for l in lines] == [False] + [has_window] * 3
  assert summary['has_window'] is has_window
  assert _read_csv(tmp_path)[-1]['window/accuracy'] not in (None, '')
