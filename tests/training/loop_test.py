"""Tests for tff_fedwin.training.loop.run_training.

The task is tests/softmax_task.py. Expected values come from numpy
written here: the sampled ids from `np.random.default_rng([seed, t])`, the eval
metrics from a numpy softmax on the recorded global models, the summary from
the CSV, the client states from the states the process returned.
"""

import collections
import csv
import json
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin import training
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold

CLIENT_IDS = task.CLIENT_IDS
NUM_CLIENTS = task.NUM_CLIENTS
evaluate_fn = task.evaluate_fn
_leaves = task.leaves


class _Crash(Exception):
  """Simulates the process dying."""


class _RecordingRunner:
  """Delegates to a runner; records every round; can die at a given round.

  The clients of a round are read from the data of its datasets.
  """

  def __init__(self, inner, crash_at_call=None):
    self._inner = inner
    self._crash_at_call = crash_at_call
    self.client_ids = []
    self.num_batches = []
    self.client_states_in = []
    self.client_states_out = []
    self.states = []

  def __getattr__(self, name):
    return getattr(self._inner, name)

  def run_round(self, state, datasets, client_states):
    if len(self.client_ids) + 1 == self._crash_at_call:
      raise _Crash()
    self.client_ids.append([task.client_of(ds) for ds in datasets])
    self.num_batches.append([sum(1 for _ in ds) for ds in datasets])
    self.client_states_in.append(client_states)
    state, new_client_states, metrics = self._inner.run_round(
        state, datasets, client_states
    )
    self.client_states_out.append(new_client_states)
    self.states.append(state)
    return state, new_client_states, metrics


@pytest.fixture(scope='module')
def processes():
  return task.build_processes()


def _runner(processes, kind, crash_at_call=None):
  if kind == 'scaffold':
    inner = runners.ScaffoldRunner(
        processes[kind], scaffold.initial_client_state(task.model_fn)
    )
  else:
    inner = runners.LearningProcessRunner(processes[kind])
  return _RecordingRunner(inner, crash_at_call)


def _run(runner, directory, **overrides):
  kwargs = dict(
      train_client_data=task.CLIENT_DATA,
      preprocess_fn=task.preprocess_fn,
      clients_per_round=2,
      total_rounds=4,
      seed=5,
      evaluate_fn=evaluate_fn,
      rounds_per_eval=1,
      rounds_per_checkpoint=2,
      output_dir=str(directory),
      experiment_name='exp',
  )
  kwargs.update(overrides)
  return training.run_training(runner, **kwargs)


def _read_csv(output_dir, experiment_name='exp'):
  path = os.path.join(str(output_dir), experiment_name, 'metrics.csv')
  with open(path, newline='') as f:
    return sorted(csv.DictReader(f), key=lambda row: int(row['round_num']))


def _saved_store(output_dir, round_num):
  return training.ClientStateStore.load(
      os.path.join(
          str(output_dir),
          'exp',
          'checkpoints',
          f'client_states_{round_num}.npz',
      ),
      scaffold.initial_client_state(task.model_fn),
  )


def _assert_same_stores(actual, expected):
  assert actual.client_ids == expected.client_ids
  for a, e in zip(
      actual.get(expected.client_ids), expected.get(expected.client_ids)
  ):
    for leaf_a, leaf_e in zip(_leaves(a), _leaves(e)):
      np.testing.assert_array_equal(leaf_a, leaf_e)


def _returned_states(runner):
  """Each client's last returned state, in order of first appearance."""
  latest = collections.OrderedDict()
  for ids, states in zip(runner.client_ids, runner.client_states_out):
    for client_id, state in zip(ids, states):
      latest[client_id] = state
  return latest


# Sampling and client states.


def test_each_round_trains_the_sampled_clients_preprocessed_datasets(
    processes, tmp_path
):
  runner = _runner(processes, 'fedavg')

  _run(runner, tmp_path, total_rounds=3, seed=7, clients_per_round=3)

  for t, (ids, num_batches) in enumerate(
      zip(runner.client_ids, runner.num_batches), start=1
  ):
    indices = np.random.default_rng([7, t]).choice(5, size=3, replace=False)
    assert ids == [CLIENT_IDS[i] for i in indices]
    assert num_batches == [
        math.ceil(task.CLIENT_SIZES[i] / task.BATCH_SIZE) for i in indices
    ]
  assert len(runner.client_ids) == 3


def test_runner_without_client_states_gets_none_and_no_state_files(
    processes, tmp_path
):
  runner = _runner(processes, 'fedavg')

  _run(runner, tmp_path, total_rounds=2)

  assert runner.client_states_in == [None, None]
  checkpoint_files = os.listdir(
      os.path.join(str(tmp_path), 'exp', 'checkpoints')
  )
  assert not [n for n in checkpoint_files if n.startswith('client_states_')]


def test_each_round_gets_the_last_returned_states_of_its_clients(
    processes, tmp_path
):
  runner = _runner(processes, 'scaffold')
  template = scaffold.initial_client_state(task.model_fn)

  _run(runner, tmp_path, total_rounds=6, clients_per_round=3)

  latest = {}
  seen_again = 0
  for ids, states_in, states_out in zip(
      runner.client_ids, runner.client_states_in, runner.client_states_out
  ):
    for client_id, state in zip(ids, states_in):
      expected = latest.get(client_id, template)
      seen_again += client_id in latest
      for a, e in zip(_leaves(state), _leaves(expected)):
        np.testing.assert_array_equal(a, e)
    latest.update(zip(ids, states_out))
  assert seen_again >= 3  # Clients come back with their own states.


# Metrics.


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


def _expected_summary(rows, last_n):
  eval_rows = [row for row in rows if row['window/accuracy'] != ''][-last_n:]
  expected = {}
  for prefix in ('window', 'global'):
    for name in ('accuracy', 'loss'):
      values = np.array([float(row[f'{prefix}/{name}']) for row in eval_rows])
      expected[prefix, name] = (np.mean(values), np.std(values))
  return [int(row['round_num']) for row in eval_rows], expected


def _assert_summary(summary, rows, last_n):
  eval_rounds, expected = _expected_summary(rows, last_n)
  assert summary['eval_rounds'] == eval_rounds
  for (prefix, name), (mean, std) in expected.items():
    np.testing.assert_allclose(summary[prefix][name]['mean'], mean, rtol=1e-12)
    np.testing.assert_allclose(
        summary[prefix][name]['std'], std, rtol=1e-12, atol=1e-15
    )


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


# Checkpoints and resumption.


def _program_state_versions(output_dir):
  names = os.listdir(os.path.join(str(output_dir), 'exp', 'checkpoints'))
  return sorted(
      int(n[len('program_state_') :])
      for n in names
      if n.startswith('program_state_')
  )


def _client_state_rounds(output_dir):
  names = os.listdir(os.path.join(str(output_dir), 'exp', 'checkpoints'))
  return sorted(
      int(n[len('client_states_') : -len('.npz')])
      for n in names
      if n.startswith('client_states_')
  )


@pytest.mark.parametrize(
    'total_rounds, rounds_per_checkpoint, expected',
    [
        # Version 0 is the initial state; then every k rounds and the last round.
        (5, 2, [0, 2, 4, 5]),
        (3, 3, [0, 3]),
        # Five kept: the first and the newest four.
        (7, 1, [0, 4, 5, 6, 7]),
    ],
)
def test_checkpoints_every_k_rounds_and_at_the_end_with_client_states(
    processes, tmp_path, total_rounds, rounds_per_checkpoint, expected
):
  runner = _runner(processes, 'scaffold')

  _run(
      runner,
      tmp_path,
      total_rounds=total_rounds,
      rounds_per_checkpoint=rounds_per_checkpoint,
      rounds_per_eval=100,
  )

  assert _program_state_versions(tmp_path) == expected
  assert _client_state_rounds(tmp_path) == expected
  saved = _saved_store(tmp_path, total_rounds)
  returned = _returned_states(runner)
  assert saved.client_ids == tuple(returned)
  for a, b in zip(saved.get(list(returned)), returned.values()):
    for leaf_a, leaf_b in zip(_leaves(a), _leaves(b)):
      np.testing.assert_array_equal(leaf_a, leaf_b)


def test_client_states_are_saved_before_the_program_state_of_their_round(
    processes, tmp_path, monkeypatch
):
  events = []
  store_save = training.ClientStateStore.save
  state_save = tff.program.FileProgramStateManager.save

  def recording_store_save(self, path):
    events.append(('client_states', os.path.basename(path)))
    store_save(self, path)

  async def recording_state_save(self, program_state, version):
    events.append(('program_state', version))
    await state_save(self, program_state, version)

  monkeypatch.setattr(training.ClientStateStore, 'save', recording_store_save)
  monkeypatch.setattr(
      tff.program.FileProgramStateManager, 'save', recording_state_save
  )

  _run(
      _runner(processes, 'scaffold'),
      tmp_path,
      total_rounds=3,
      rounds_per_checkpoint=2,
  )

  assert events == [
      ('client_states', 'client_states_0.npz'),
      ('program_state', 0),
      ('client_states', 'client_states_2.npz'),
      ('program_state', 2),
      ('client_states', 'client_states_3.npz'),
      ('program_state', 3),
  ]


@pytest.fixture(scope='module')
def uninterrupted_runs(processes, tmp_path_factory):
  """Uninterrupted 4-round runs, one per process kind, made on first use."""
  runs = {}

  def get(kind):
    if kind not in runs:
      output_dir = tmp_path_factory.mktemp(f'uninterrupted_{kind}')
      runner = _runner(processes, kind)
      _run(runner, output_dir)
      runs[kind] = (runner, _read_csv(output_dir), output_dir)
    return runs[kind]

  return get


def _without_times(row):
  return {
      k: v
      for k, v in row.items()
      if k not in ('round_time_seconds', 'eval_time_seconds')
  }


@pytest.mark.parametrize(
    'kind, crash, resumed_from',
    [
        # Checkpoints at rounds 0, 2, 4. A crash in round 3 or 4 resumes from 2,
        # in round 1 from the initial state.
        ('fedavg', ('round', 3), 2),
        ('window', ('round', 3), 2),
        ('window', ('round', 4), 2),
        ('scaffold', ('round', 1), 0),
        ('scaffold', ('round', 3), 2),
        ('scaffold', ('round', 4), 2),
        # Dies after client_states_2.npz, before program_state_2: resumes from 0.
        ('scaffold', ('program_state_save', 2), 0),
    ],
)
def test_resumed_run_ends_exactly_as_uninterrupted_run(
    processes,
    uninterrupted_runs,
    tmp_path,
    monkeypatch,
    kind,
    crash,
    resumed_from,
):
  reference, reference_rows, _ = uninterrupted_runs(kind)
  crash_kind, crash_at = crash
  crashing = _runner(
      processes, kind, crash_at if crash_kind == 'round' else None
  )
  if crash_kind == 'program_state_save':
    state_save = tff.program.FileProgramStateManager.save

    async def failing_save(self, program_state, version):
      if version == crash_at:
        raise _Crash()
      await state_save(self, program_state, version)

    monkeypatch.setattr(
        tff.program.FileProgramStateManager, 'save', failing_save
    )
  with pytest.raises(_Crash):
    _run(crashing, tmp_path)
  monkeypatch.undo()
  resumed = _runner(processes, kind)

  summary = _run(resumed, tmp_path)

  assert summary['resumed_from_round'] == resumed_from
  assert len(resumed.client_ids) == 4 - resumed_from
  assert resumed.client_ids == reference.client_ids[resumed_from:]
  for actual, expected in zip(
      _leaves(resumed.states[-1]), _leaves(reference.states[-1])
  ):
    np.testing.assert_array_equal(actual, expected)
  for actual, expected in zip(
      _leaves(resumed.window_model_weights(resumed.states[-1])),
      _leaves(reference.window_model_weights(reference.states[-1])),
  ):
    np.testing.assert_array_equal(actual, expected)
  assert [_without_times(r) for r in _read_csv(tmp_path)] == [
      _without_times(r) for r in reference_rows
  ]


def test_resumed_scaffold_run_has_the_uninterrupted_client_states(
    processes, uninterrupted_runs, tmp_path
):
  reference, _, reference_dir = uninterrupted_runs('scaffold')
  with pytest.raises(_Crash):
    _run(_runner(processes, 'scaffold', crash_at_call=3), tmp_path)
  resumed = _runner(processes, 'scaffold')

  _run(resumed, tmp_path)

  expected_store = _saved_store(reference_dir, 4)
  assert len(expected_store.client_ids) >= 2
  assert expected_store.client_ids == tuple(_returned_states(reference))
  _assert_same_stores(_saved_store(tmp_path, 4), expected_store)


def test_summary_ignores_rows_of_a_longer_crashed_run(processes, tmp_path):
  # Checkpoints at 0 and 2; round 3 is in the CSV when round 4 dies.
  with pytest.raises(_Crash):
    _run(_runner(processes, 'fedavg', crash_at_call=4), tmp_path)

  summary = _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)

  assert summary['eval_rounds'] == [1, 2]
  rows = [r for r in _read_csv(tmp_path) if int(r['round_num']) <= 2]
  _assert_summary(summary, rows, last_n=10)


def test_progress_lines_at_first_and_eval_rounds(processes, tmp_path, capsys):
  # Rounds take well under PROGRESS_INTERVAL_SECONDS (30 s) here, so rounds
  # without an eval (3, 5) print nothing; round 6 is the last, evaluated.
  _run(
      _runner(processes, 'fedavg'), tmp_path, total_rounds=6, rounds_per_eval=2
  )
  lines = [
      l
      for l in capsys.readouterr().out.splitlines()
      if l.startswith('exp: round ')
  ]
  assert [l.split()[2] for l in lines] == ['1/6', '2/6', '4/6', '6/6']
  assert 'window/accuracy' not in lines[0]
  assert all('window/accuracy' in l for l in lines[1:])


def test_resume_is_logged_and_progress_printed(processes, tmp_path, capsys):
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)
  capsys.readouterr()

  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=3)

  lines = capsys.readouterr().out.splitlines()
  assert any('resuming from the checkpoint of round 2' in l for l in lines)
  progress = [l for l in lines if 'round 3/3' in l]
  assert len(progress) == 1
  assert 'ETA' in progress[0] and 'window/accuracy' in progress[0]


@pytest.mark.parametrize(
    'overrides, argument',
    [
        (dict(seed=6), '`seed`'),
        (dict(clients_per_round=3), '`clients_per_round`'),
        (dict(total_rounds=1), '`total_rounds`'),
    ],
)
def test_resume_with_other_arguments_raises(
    processes, tmp_path, overrides, argument
):
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)

  with pytest.raises(ValueError, match=argument):
    _run(_runner(processes, 'fedavg'), tmp_path, **overrides)


# Argument validation.


@pytest.mark.parametrize(
    'overrides, argument',
    [
        (dict(clients_per_round=NUM_CLIENTS + 1), '`clients_per_round`'),
        (dict(clients_per_round=0), '`clients_per_round`'),
        (dict(clients_per_round=2.0), '`clients_per_round`'),
        (dict(total_rounds=0), '`total_rounds`'),
        (dict(rounds_per_eval=0), '`rounds_per_eval`'),
        (dict(rounds_per_checkpoint=-1), '`rounds_per_checkpoint`'),
        (dict(seed=-1), '`seed`'),
        (dict(summary_last_n=0), '`summary_last_n`'),
        (dict(train_client_data=[1, 2]), '`train_client_data`'),
        (dict(preprocess_fn=None), '`preprocess_fn`'),
        (dict(evaluate_fn=None), '`evaluate_fn`'),
        (dict(output_dir=''), '`output_dir`'),
        (dict(experiment_name=''), '`experiment_name`'),
        (dict(experiment_name='a/b'), '`experiment_name`'),
    ],
)
def test_bad_arguments_raise_naming_the_argument_before_any_work(
    processes, tmp_path, overrides, argument
):
  runner = _runner(processes, 'fedavg')

  with pytest.raises(ValueError, match=argument):
    _run(runner, tmp_path, **overrides)

  assert os.listdir(tmp_path) == []


def test_runner_without_required_methods_raises(tmp_path):
  with pytest.raises(ValueError, match='`runner`'):
    _run(object(), tmp_path)


def test_runner_without_initial_client_state_raises(processes, tmp_path):

  class OldRunner:
    """A runner of the earlier interface: no `initial_client_state`."""

    def __init__(self, inner):
      self.initialize = inner.initialize
      self.run_round = inner.run_round
      self.global_model_weights = inner.global_model_weights
      self.window_model_weights = inner.window_model_weights

  runner = OldRunner(runners.LearningProcessRunner(processes['fedavg']))

  with pytest.raises(ValueError, match='`initial_client_state`'):
    _run(runner, tmp_path)
  assert os.listdir(tmp_path) == []


def test_runner_with_client_states_must_return_them(processes, tmp_path):

  class ForgetfulRunner(runners.LearningProcessRunner):
    """Declares client states but returns none."""

    def initial_client_state(self):
      return scaffold.initial_client_state(task.model_fn)

    def run_round(self, state, datasets, client_states):
      assert len(client_states) == 2
      return super().run_round(state, datasets, None)

  with pytest.raises(ValueError, match='returned no client states'):
    _run(ForgetfulRunner(processes['fedavg']), tmp_path)
