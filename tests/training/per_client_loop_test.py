"""run_training with an `evaluate_fn` that evaluates each test client.

The task is tests/softmax_task.py; its 30 test examples belong to three test
clients of 8, 8 and 14 examples, interleaved (example i to client
min(i % 4, 2) of 'c', 'a', 'b'). The
evaluate_fn here gives the per-client sums the way `TestSetEvaluator` lays
them out, from numpy softmax cross-entropy. The tests check the written
per_client_metrics.csv rows against numpy on each client's own examples,
metrics.csv's statistics against numpy over the written rows, and a resume
against the uninterrupted run's file, byte for byte.
"""

import csv
import os

import numpy as np
import pytest

from tests import softmax_task as task
from tests.training import loop_fixtures
from tff_fedwin.tasks import per_client
from tff_fedwin.training import checkpoint_manifest
from tff_fedwin.training import metrics_rows

_CLIENT_OF_EXAMPLE = np.minimum(np.arange(len(task.TEST_Y)) % 4, 2)
_ORDER = ('c', 'a', 'b')  # Client ids in `TestClients` order.


def _logits(model_weights):
  kernel, bias = (np.asarray(w, np.float64) for w in model_weights.trainable)
  return task.TEST_X.astype(np.float64) @ kernel + bias


def _ce(logits):
  log_norm = np.log(np.sum(np.exp(logits), axis=1))
  return log_norm - logits[np.arange(len(task.TEST_Y)), task.TEST_Y]


class _PerClientEvaluator:
  """The test set's pooled metrics and (loss, 1, correct, 1) per example."""

  test_clients = per_client.TestClients(_ORDER, _CLIENT_OF_EXAMPLE)

  def __call__(self, model_weights):
    return task.evaluate_fn(model_weights)

  def evaluate_all_per_client(self, model_weights):
    metrics, examples = [], []
    for weights in model_weights:
      metrics.append(task.evaluate_fn(weights))
      logits = _logits(weights)
      hits = np.argmax(logits, axis=1) == task.TEST_Y
      ones = np.ones(len(hits))
      examples.append(np.stack([_ce(logits), ones, hits, ones], axis=1))
    sums = per_client.client_sums(self.test_clients, np.stack(examples, axis=1))
    return metrics, sums


def _run(processes, directory, crash_at_call=None):
  runner = loop_fixtures.make_runner(processes, 'window', crash_at_call)
  loop_fixtures.run(
      runner,
      directory,
      evaluate_fn=_PerClientEvaluator(),
      rounds_per_eval=1,
      rounds_per_checkpoint=2,
  )
  return runner


def _csv_path(directory):
  return os.path.join(str(directory), 'exp', 'per_client_metrics.csv')


def _rows(directory):
  with open(_csv_path(directory), newline='') as f:
    return list(csv.DictReader(f))


@pytest.fixture(scope='module')
def uninterrupted(processes, tmp_path_factory):
  directory = tmp_path_factory.mktemp('uninterrupted')
  runner = _run(processes, directory)
  with open(_csv_path(directory), 'rb') as f:
    return runner, directory, f.read()


def test_rows_are_each_clients_numpy_metrics(uninterrupted):
  runner, directory, _ = uninterrupted
  rows = _rows(directory)
  assert [(r['round_num'], r['client_id']) for r in rows] == [
      (str(t), c) for t in range(1, 5) for c in _ORDER
  ]
  for prefix, weights_of in (
      ('window', runner.window_model_weights),
      ('global', runner.global_model_weights),
  ):
    for round_num, state in enumerate(runner.states, start=1):
      logits = _logits(weights_of(state))
      for i, client in enumerate(_ORDER):
        mine = _CLIENT_OF_EXAMPLE == i
        row = rows[3 * (round_num - 1) + i]
        assert int(row['num_examples']) == int(row['num_counted'])
        assert int(row['num_examples']) == (8, 8, 14)[i]
        np.testing.assert_allclose(
            float(row[f'{prefix}/loss']), np.mean(_ce(logits)[mine]), rtol=1e-12
        )
        hits = np.argmax(logits[mine], axis=1) == task.TEST_Y[mine]
        assert float(row[f'{prefix}/accuracy']) == np.mean(hits)


def test_metrics_csv_statistics_are_numpys_over_the_written_rows(
    uninterrupted,
):
  _, directory, _ = uninterrupted
  rows = _rows(directory)
  for metrics_row in loop_fixtures.read_csv(directory):
    mine = [r for r in rows if r['round_num'] == metrics_row['round_num']]
    for prefix in ('window', 'global'):
      accuracy = np.array([float(r[f'{prefix}/accuracy']) for r in mine])
      counted = np.array([float(r['num_counted']) for r in mine])
      loss = np.array([float(r[f'{prefix}/loss']) for r in mine])

      def column(name, prefix=prefix):
        return float(metrics_row[f'{prefix}/{name}'])

      weighted = np.sum(accuracy * counted) / np.sum(counted)
      # The example-weighted mean over clients is the pooled accuracy.
      assert column('client_accuracy_weighted') == pytest.approx(
          weighted, abs=1e-12
      )
      assert column('client_accuracy_weighted') == column('accuracy')
      assert column('client_accuracy_mean') == pytest.approx(
          np.mean(accuracy), abs=1e-12
      )
      assert column('client_loss_mean') == pytest.approx(
          np.mean(loss), rel=1e-12
      )
      for q in (10, 50, 90):
        assert column(f'client_accuracy_p{q}') == pytest.approx(
            np.percentile(accuracy, q), abs=1e-12
        )


def test_resume_cuts_a_partial_row_back_to_the_checkpoint(
    processes, uninterrupted, tmp_path
):
  _, _, expected = uninterrupted
  # Dies in round 4: rows of rounds 1-3 written, the checkpoint of round 2
  # the newest; then a write killed midway (a partial row).
  with pytest.raises(loop_fixtures.Crash):
    _run(processes, tmp_path, crash_at_call=4)
  path = _csv_path(tmp_path)
  with open(path, 'ab') as f:
    f.write(b'4,c,10')

  _run(processes, tmp_path)

  with open(path, 'rb') as f:
    assert f.read() == expected
  damaged = os.path.join(str(tmp_path), 'exp', checkpoint_manifest.DAMAGED_DIR)
  assert not os.path.exists(damaged)


def test_changed_rows_stop_the_resume_in_one_line_and_move_nothing(
    processes, uninterrupted, tmp_path
):
  _, _, expected = uninterrupted
  # A byte of round 2's rows changed: version 2 vouches for them, but they
  # are no damage of its model or client states. The resume stops, nothing
  # moved; with the file moved aside it resumes from round 2 and writes the
  # rows of rounds 3-4 (the uninterrupted file's from round 3 on).
  with pytest.raises(loop_fixtures.Crash):
    _run(processes, tmp_path, crash_at_call=4)
  path = _csv_path(tmp_path)
  with open(path, 'r+b') as f:
    data = f.read()
    offset = data.index(b'\n2,') + 5
    f.seek(offset)
    f.write(bytes([data[offset] ^ 1]))
  run_dir = os.path.join(str(tmp_path), 'exp')
  before = sorted(os.listdir(os.path.join(run_dir, 'checkpoints')))

  with pytest.raises(
      metrics_rows.RowsFileError,
      match=r'per_client_metrics\.csv disagrees with the checkpoint '
      r'\(checksum mismatch of the first \d+ bytes .*\); restore it, or move '
      r'it aside to resume with per-client rows from round 3 on\. Nothing was '
      r'moved\.$',
  ):
    _run(processes, tmp_path)
  assert sorted(os.listdir(os.path.join(run_dir, 'checkpoints'))) == before
  assert not os.path.exists(os.path.join(run_dir, 'damaged'))

  os.rename(path, path + '.changed')
  _run(processes, tmp_path)
  with open(path, 'rb') as f:
    resumed = f.read()
  header, rest = expected.split(b'\n', 1)
  assert resumed == header + b'\n' + rest[rest.index(b'\n3,') + 1 :]
