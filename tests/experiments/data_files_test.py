"""Tests for tff_fedwin.experiments.data_files: a task's files read once, early.

`read_data_files` runs the task's loader before TensorFlow is needed; the task
built afterwards (`run.create_task`, what `run_experiment` calls) must take
that result over, not read the files a second time: each loader is wrapped to
count its calls.
"""

import json

import numpy as np
import pytest

from tests.data import leaf_fixtures
from tff_fedwin import experiments
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import sources
from tff_fedwin.data import text_records
from tff_fedwin.experiments import run


def _counted(monkeypatch, module, name):
  calls = []
  loader = getattr(module, name)

  def counting(*args, **kwargs):
    calls.append(args)
    return loader(*args, **kwargs)

  monkeypatch.setattr(module, name, counting)
  return calls


def _npz_config(_, data_npz):
  return experiments.ExperimentConfig(task='npz', data_npz=data_npz)


def _leaf_config(tmp_path, _):
  root, _, _ = leaf_fixtures.shakespeare_by_user(tmp_path / 'leaf')
  return experiments.ExperimentConfig(
      task='leaf',
      data_dir=root,
      cache_dir=str(tmp_path / 'cache'),
      clients_per_round=2,
  )


def _text_config(tmp_path, _):
  path = tmp_path / 'text.jsonl'
  records = [('a', 'x y x', 'train'), ('b', 'y z', 'train'), ('a', 'x', 'test')]
  path.write_text(
      ''.join(
          json.dumps(dict(client_id=c, text=t, split=s)) + '\n'
          for c, t, s in records
      )
  )
  return experiments.ExperimentConfig(
      task='text', data_jsonl=str(path), clients_per_round=2
  )


@pytest.mark.parametrize(
    'module, loader, make_config, train_clients',
    [
        (sources, 'load_npz', _npz_config, 100),
        (leaf_cache, 'load_leaf_cache', _leaf_config, 2),
        (text_records, 'load_text_splits', _text_config, 2),
    ],
    ids=['npz', 'leaf', 'text'],
)
def test_the_task_takes_the_early_read_over(
    monkeypatch, tmp_path, data_npz, module, loader, make_config, train_clients
):
  config = make_config(tmp_path, data_npz)
  calls = _counted(monkeypatch, module, loader)
  experiments.read_data_files(config)
  assert len(calls) == 1
  task = run.create_task(config)
  assert len(calls) == 1
  assert len(task.train_data.client_ids) == train_clients


def test_a_bad_file_is_an_input_data_error_naming_it(tmp_path):
  path = tmp_path / 'no_test.npz'
  np.savez(path, x_train=np.zeros((4, 2)), y_train=np.zeros(4, int))
  config = experiments.ExperimentConfig(task='npz', data_npz=str(path))
  with pytest.raises(
      experiments.InputDataError,
      match=rf'^{path} lacks the array\(s\) x_test, y_test; ',
  ):
    experiments.read_data_files(config)


def test_a_task_without_files_reads_nothing(monkeypatch):
  calls = _counted(monkeypatch, sources, 'load_npz')
  experiments.read_data_files(experiments.ExperimentConfig(task='mnist'))
  assert not calls
