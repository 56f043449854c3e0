"""Tests for tff_fedwin.training.outputs: names, paths, CSV summary, JSON."""

import json
import os

import pytest

from tff_fedwin.training import outputs

# Rounds 1-5, eval at 2, 4 and 5; round 6 was left by a longer run that died.
_CSV = (
    (
        'round_num,train/loss,round_time_seconds,window/accuracy,window/loss,'
        'global/accuracy,global/loss,eval_time_seconds\n'
    )
    + """\
1,0.9,1.0,,,,,
2,0.8,1.0,0.5,2.0,0.25,3.0,0.5
3,0.7,1.0,,,,,
5,0.5,1.0,0.75,1.0,0.5,1.5,0.5
4,0.6,1.0,0.625,1.5,0.375,2.0,0.5
6,0.4,1.0,1.0,0.0,1.0,0.0,0.5
"""
)


@pytest.fixture
def metrics_csv(tmp_path):
  path = tmp_path / outputs.METRICS_CSV
  path.write_text(_CSV)
  return str(path)


def test_output_names():
  assert (
      outputs.METRICS_CSV,
      outputs.SUMMARY_JSON,
      outputs.CHECKPOINT_DIR,
      outputs.TENSORBOARD_DIR,
  ) == ('metrics.csv', 'summary.json', 'checkpoints', 'tensorboard')
  assert (outputs.ROUND_KEY, outputs.ROUND_TIME_KEY, outputs.EVAL_TIME_KEY) == (
      'round_num',
      'round_time_seconds',
      'eval_time_seconds',
  )
  assert (
      outputs.TRAIN_PREFIX,
      outputs.WINDOW_PREFIX,
      outputs.GLOBAL_PREFIX,
  ) == ('train', 'window', 'global')


@pytest.mark.parametrize(
    'name, expected',
    [
        ('exp', True),
        ('a.b', True),
        ('', False),
        ('.', False),
        ('..', False),
        ('a/b', False),
        (None, False),
        (3, False),
    ],
)
def test_is_directory_name(name, expected):
  assert outputs.is_directory_name(name) is expected


def test_run_paths():
  paths = outputs.RunPaths('/out', 'exp')
  assert (
      paths.root,
      paths.checkpoints,
      paths.metrics_csv,
      paths.tensorboard,
      paths.summary_json,
  ) == (
      '/out/exp',
      '/out/exp/checkpoints',
      '/out/exp/metrics.csv',
      '/out/exp/tensorboard',
      '/out/exp/summary.json',
  )


def test_summarize_csv_last_two_eval_rounds(metrics_csv):
  summary = outputs.summarize_csv(metrics_csv, last_n=2, last_round=5)

  # Eval rounds 4 and 5: window accuracy 0.625, 0.75 -> mean 0.6875, std
  # 0.0625; global loss 2.0, 1.5 -> 1.75 +- 0.25.
  assert summary['eval_rounds'] == [4, 5]
  assert summary['window']['accuracy'] == {
      'mean': 0.6875,
      'std': 0.0625,
      'values': [0.625, 0.75],
  }
  assert summary['global']['loss'] == {
      'mean': 1.75,
      'std': 0.25,
      'values': [2.0, 1.5],
  }
  assert summary['rounds_in_csv'] == 5
  # Five round times of 1 s and three evals of 0.5 s.
  assert summary['total_round_and_eval_time_seconds'] == 6.5


def test_summarize_csv_more_rounds_than_evals(metrics_csv):
  summary = outputs.summarize_csv(metrics_csv, last_n=10, last_round=5)

  assert summary['eval_rounds'] == [2, 4, 5]
  assert summary['window']['loss']['values'] == [2.0, 1.5, 1.0]
  assert summary['window']['loss']['mean'] == 1.5


def test_summarize_csv_without_a_file(tmp_path):
  summary = outputs.summarize_csv(
      str(tmp_path / 'missing.csv'), last_n=2, last_round=5
  )
  assert summary == {
      'window': {},
      'global': {},
      'eval_rounds': [],
      'rounds_in_csv': 0,
      'total_round_and_eval_time_seconds': 0.0,
  }


def test_write_json_atomically(tmp_path):
  path = str(tmp_path / 'summary.json')
  outputs.write_json_atomically({'b': [1, 2.5], 'a': None}, path)
  outputs.write_json_atomically({'c': 'new'}, path)

  with open(path) as f:
    assert json.load(f) == {'c': 'new'}
  assert os.listdir(tmp_path) == ['summary.json']
