"""Tests for tff_fedwin.training.loop: runners and run_training.

The task is a 2-class linear softmax model on 3 features (a keras Dense layer
with a fixed initial kernel, so every run starts from the same model) over 5
clients of 4, 6, 8, 10 and 12 examples. Expected values come from numpy written
here: the sampled ids from `np.random.default_rng([seed, t])`, the eval metrics
from a numpy softmax on the recorded global models, the summary from the CSV.
"""

import collections
import csv
import json
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import training
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import scaffold
from tff_fedwin.data import client_data_from_partition

NUM_FEATURES = 3
NUM_CLASSES = 2
CLIENT_SIZES = (4, 6, 8, 10, 12)
NUM_CLIENTS = len(CLIENT_SIZES)
BATCH_SIZE = 3
_RNG = np.random.default_rng(2024)
INITIAL_KERNEL = (0.5 * _RNG.normal(size=(NUM_FEATURES, NUM_CLASSES))).astype(
    np.float32)
_TRUE_KERNEL = np.array([[1.0, -1.0], [0.5, 0.2], [-0.3, 0.3]])


def _labelled(num_examples):
  x = _RNG.normal(size=(num_examples, NUM_FEATURES)).astype(np.float32)
  y = np.argmax(x @ _TRUE_KERNEL, axis=1).astype(np.int32)
  return x, y


TRAIN_X, TRAIN_Y = _labelled(sum(CLIENT_SIZES))
TEST_X, TEST_Y = _labelled(30)
_BOUNDS = np.cumsum((0,) + CLIENT_SIZES)
PARTITION = [np.arange(a, b) for a, b in zip(_BOUNDS[:-1], _BOUNDS[1:])]
CLIENT_DATA = client_data_from_partition(TRAIN_X, TRAIN_Y, PARTITION)
CLIENT_IDS = list(CLIENT_DATA.client_ids)

_INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, NUM_FEATURES], tf.float32),
    y=tf.TensorSpec([None], tf.int32),
)


def model_fn():
  keras_model = tf.keras.Sequential([
      tf.keras.layers.Dense(
          NUM_CLASSES,
          kernel_initializer=tf.keras.initializers.Constant(INITIAL_KERNEL),
          bias_initializer='zeros',
          input_shape=(NUM_FEATURES,),
      )
  ])
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=_INPUT_SPEC,
  )


def preprocess_fn(dataset):
  return dataset.batch(BATCH_SIZE)


def evaluate_fn(model_weights):
  """Accuracy and mean softmax cross-entropy on the test set, in numpy."""
  kernel, bias = (np.asarray(w, np.float64) for w in model_weights.trainable)
  logits = TEST_X.astype(np.float64) @ kernel + bias
  log_norm = np.log(np.sum(np.exp(logits), axis=1))
  loss = np.mean(log_norm - logits[np.arange(len(TEST_Y)), TEST_Y])
  accuracy = np.mean(np.argmax(logits, axis=1) == TEST_Y)
  return {'accuracy': float(accuracy), 'loss': float(loss)}


class _Crash(Exception):
  """Simulates the process dying."""


class _RecordingRunner:
  """Delegates to a runner; records every round; can die at a given round."""

  def __init__(self, inner, crash_at_call=None):
    self._inner = inner
    self._crash_at_call = crash_at_call
    self.client_ids = []
    self.num_batches = []
    self.states = []

  def __getattr__(self, name):
    return getattr(self._inner, name)

  def run_round(self, state, client_ids, datasets):
    if len(self.client_ids) + 1 == self._crash_at_call:
      raise _Crash()
    self.client_ids.append(list(client_ids))
    self.num_batches.append([sum(1 for _ in ds) for ds in datasets])
    state, metrics = self._inner.run_round(state, client_ids, datasets)
    self.states.append(state)
    return state, metrics


@pytest.fixture(scope='module')
def processes():
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=0.5)
  return {
      'fedavg': fed_win.build_fed_win(model_fn, sgd),
      'window': fed_win.build_fed_win(model_fn, sgd, window_size=2),
      'scaffold': scaffold.build_scaffold(
          model_fn, client_learning_rate=0.2, total_clients=NUM_CLIENTS),
  }


def _runner(processes, kind, crash_at_call=None):
  if kind == 'scaffold':
    inner = training.ScaffoldRunner(
        processes[kind],
        training.ClientStateStore(scaffold.initial_client_state(model_fn)))
  else:
    inner = training.LearningProcessRunner(processes[kind])
  return _RecordingRunner(inner, crash_at_call)


def _run(runner, directory, **overrides):
  kwargs = dict(
      train_client_data=CLIENT_DATA,
      preprocess_fn=preprocess_fn,
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


def _leaves(structure):
  return [np.asarray(leaf) for leaf in tf.nest.flatten(structure)]


# Client sampling.


@pytest.mark.parametrize('seed, round_num, clients_per_round', [
    (0, 1, 1), (5, 3, 2), (123, 40, 5),
])
def test_sample_clients_reproduces_default_rng_of_seed_and_round(
    seed, round_num, clients_per_round):
  rng = np.random.default_rng([seed, round_num])
  expected = [CLIENT_IDS[i] for i in rng.choice(
      NUM_CLIENTS, size=clients_per_round, replace=False)]

  sampled = training.sample_clients(
      CLIENT_IDS, clients_per_round, seed, round_num)

  assert sampled == expected
  assert len(set(sampled)) == clients_per_round


def test_each_round_trains_the_sampled_clients_preprocessed_datasets(
    processes, tmp_path):
  runner = _runner(processes, 'fedavg')

  _run(runner, tmp_path, total_rounds=3, seed=7, clients_per_round=3)

  for t, (ids, num_batches) in enumerate(
      zip(runner.client_ids, runner.num_batches), start=1):
    indices = np.random.default_rng([7, t]).choice(5, size=3, replace=False)
    assert ids == [CLIENT_IDS[i] for i in indices]
    assert num_batches == [
        math.ceil(CLIENT_SIZES[i] / BATCH_SIZE) for i in indices]
  assert len(runner.client_ids) == 3


# Metrics.


def test_flatten_scalar_metrics_keeps_numeric_scalars_with_paths():
  point = collections.namedtuple('Point', ['a', 'b'])
  metrics = collections.OrderedDict(
      client_work=collections.OrderedDict(
          train=collections.OrderedDict(loss=np.float32(0.5), n=np.int64(3))),
      finalizer=point(a=np.bool_(True), b=np.zeros(3)),
      items=[1.5, 'text'],
      empty=(),
  )

  flat = training.flatten_scalar_metrics(metrics, 'train')

  assert flat == collections.OrderedDict([
      ('train/client_work/train/loss', 0.5),
      ('train/client_work/train/n', 3),
      ('train/finalizer/a', 1),
      ('train/items/0', 1.5),
  ])


@pytest.mark.parametrize('total_rounds, rounds_per_eval, eval_rounds', [
    (5, 2, [2, 4, 5]),
    (3, 1, [1, 2, 3]),
    (2, 5, [2]),
])
def test_csv_has_a_row_per_round_and_eval_columns_on_eval_rounds(
    processes, tmp_path, total_rounds, rounds_per_eval, eval_rounds):
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=total_rounds,
       rounds_per_eval=rounds_per_eval)

  rows = _read_csv(tmp_path)

  assert [int(row['round_num']) for row in rows] == list(
      range(1, total_rounds + 1))
  eval_columns = ('window/accuracy', 'window/loss', 'global/accuracy',
                  'global/loss', 'eval_time_seconds')
  for row in rows:
    float(row['round_time_seconds'])
    float(row['train/client_work/train/loss'])
    assert int(row['train/client_work/train/num_examples']) > 0
    is_eval_round = int(row['round_num']) in eval_rounds
    for column in eval_columns:
      assert (row[column] != '') == is_eval_round, (row['round_num'], column)


def test_eval_columns_are_evaluate_fn_of_window_and_global_models(
    processes, tmp_path):
  runner = _runner(processes, 'window')

  _run(runner, tmp_path, total_rounds=3, rounds_per_eval=1)

  rows = _read_csv(tmp_path)
  global_kernels = [
      [np.asarray(w, np.float64) for w in s.global_model_weights.trainable]
      for s in runner.states]
  for t, row in enumerate(rows, start=1):
    current = global_kernels[t - 1]
    # W = 2: the window model is w^1 at round 1, then (w^{t-1} + w^t) / 2.
    previous = global_kernels[t - 2] if t >= 2 else current
    window = [(a + b) / 2 for a, b in zip(previous, current)]
    expected_window = evaluate_fn(tff.learning.models.ModelWeights(window, []))
    expected_global = evaluate_fn(
        tff.learning.models.ModelWeights(current, []))
    for name in ('accuracy', 'loss'):
      np.testing.assert_allclose(
          float(row[f'window/{name}']), expected_window[name], rtol=1e-5)
      np.testing.assert_allclose(
          float(row[f'global/{name}']), expected_global[name], rtol=1e-5)
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
        summary[prefix][name]['std'], std, rtol=1e-12, atol=1e-15)


@pytest.fixture(scope='module')
def finished_run(processes, tmp_path_factory):
  """A window run of 5 rounds with eval rounds 2, 4, 5 and its summary."""
  output_dir = tmp_path_factory.mktemp('finished')
  summary = _run(_runner(processes, 'window'), output_dir, total_rounds=5,
                 rounds_per_eval=2, summary_last_n=2)
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
    processes, finished_run, tmp_path, last_n):
  source_dir, _ = finished_run
  shutil.copytree(str(source_dir), str(tmp_path), dirs_exist_ok=True)
  runner = _runner(processes, 'window')

  summary = _run(runner, tmp_path, total_rounds=5, rounds_per_eval=2,
                 summary_last_n=last_n)

  assert runner.client_ids == []
  assert summary['resumed_from_round'] == 5
  _assert_summary(summary, _read_csv(tmp_path), last_n)


# Checkpoints and resumption.


def _program_state_versions(output_dir):
  names = os.listdir(os.path.join(str(output_dir), 'exp', 'checkpoints'))
  return sorted(int(n[len('program_state_'):]) for n in names
                if n.startswith('program_state_'))


def _client_state_rounds(output_dir):
  names = os.listdir(os.path.join(str(output_dir), 'exp', 'checkpoints'))
  return sorted(int(n[len('client_states_'):-len('.npz')]) for n in names
                if n.startswith('client_states_'))


@pytest.mark.parametrize('total_rounds, rounds_per_checkpoint, expected', [
    # Version 0 is the initial state; then every k rounds and the last round.
    (5, 2, [0, 2, 4, 5]),
    (3, 3, [0, 3]),
    # Five kept: the first and the newest four.
    (7, 1, [0, 4, 5, 6, 7]),
])
def test_checkpoints_every_k_rounds_and_at_the_end_with_client_states(
    processes, tmp_path, total_rounds, rounds_per_checkpoint, expected):
  runner = _runner(processes, 'scaffold')

  _run(runner, tmp_path, total_rounds=total_rounds,
       rounds_per_checkpoint=rounds_per_checkpoint, rounds_per_eval=100)

  assert _program_state_versions(tmp_path) == expected
  assert _client_state_rounds(tmp_path) == expected
  saved = training.ClientStateStore.load(
      os.path.join(str(tmp_path), 'exp', 'checkpoints',
                   f'client_states_{total_rounds}.npz'),
      scaffold.initial_client_state(model_fn))
  store = runner.client_state_store
  assert saved.client_ids == store.client_ids
  for a, b in zip(saved.get(store.client_ids), store.get(store.client_ids)):
    for leaf_a, leaf_b in zip(_leaves(a), _leaves(b)):
      np.testing.assert_array_equal(leaf_a, leaf_b)


def test_client_states_are_saved_before_the_program_state_of_their_round(
    processes, tmp_path, monkeypatch):
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
      tff.program.FileProgramStateManager, 'save', recording_state_save)

  _run(_runner(processes, 'scaffold'), tmp_path, total_rounds=3,
       rounds_per_checkpoint=2)

  assert events == [
      ('client_states', 'client_states_0.npz'), ('program_state', 0),
      ('client_states', 'client_states_2.npz'), ('program_state', 2),
      ('client_states', 'client_states_3.npz'), ('program_state', 3),
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
      runs[kind] = (runner, _read_csv(output_dir))
    return runs[kind]

  return get


def _without_times(row):
  return {k: v for k, v in row.items()
          if k not in ('round_time_seconds', 'eval_time_seconds')}


@pytest.mark.parametrize('kind, crash, resumed_from', [
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
])
def test_resumed_run_ends_exactly_as_uninterrupted_run(
    processes, uninterrupted_runs, tmp_path, monkeypatch, kind, crash,
    resumed_from):
  reference, reference_rows = uninterrupted_runs(kind)
  crash_kind, crash_at = crash
  crashing = _runner(
      processes, kind, crash_at if crash_kind == 'round' else None)
  if crash_kind == 'program_state_save':
    state_save = tff.program.FileProgramStateManager.save

    async def failing_save(self, program_state, version):
      if version == crash_at:
        raise _Crash()
      await state_save(self, program_state, version)

    monkeypatch.setattr(
        tff.program.FileProgramStateManager, 'save', failing_save)
  with pytest.raises(_Crash):
    _run(crashing, tmp_path)
  monkeypatch.undo()
  resumed = _runner(processes, kind)

  summary = _run(resumed, tmp_path)

  assert summary['resumed_from_round'] == resumed_from
  assert len(resumed.client_ids) == 4 - resumed_from
  assert resumed.client_ids == reference.client_ids[resumed_from:]
  for actual, expected in zip(_leaves(resumed.states[-1]),
                              _leaves(reference.states[-1])):
    np.testing.assert_array_equal(actual, expected)
  for actual, expected in zip(
      _leaves(resumed.window_model_weights(resumed.states[-1])),
      _leaves(reference.window_model_weights(reference.states[-1]))):
    np.testing.assert_array_equal(actual, expected)
  assert [_without_times(r) for r in _read_csv(tmp_path)] == [
      _without_times(r) for r in reference_rows]


def test_resumed_scaffold_run_has_the_uninterrupted_client_states(
    processes, uninterrupted_runs, tmp_path):
  reference, _ = uninterrupted_runs('scaffold')
  with pytest.raises(_Crash):
    _run(_runner(processes, 'scaffold', crash_at_call=3), tmp_path)
  resumed = _runner(processes, 'scaffold')

  _run(resumed, tmp_path)

  expected_store = reference.client_state_store
  actual_store = resumed.client_state_store
  assert actual_store.client_ids == expected_store.client_ids
  assert len(actual_store.client_ids) >= 2
  for actual, expected in zip(actual_store.get(expected_store.client_ids),
                              expected_store.get(expected_store.client_ids)):
    for a, e in zip(_leaves(actual), _leaves(expected)):
      np.testing.assert_array_equal(a, e)


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
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=6,
       rounds_per_eval=2)
  lines = [l for l in capsys.readouterr().out.splitlines()
           if l.startswith('exp: round ')]
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


@pytest.mark.parametrize('overrides, argument', [
    (dict(seed=6), '`seed`'),
    (dict(clients_per_round=3), '`clients_per_round`'),
    (dict(total_rounds=1), '`total_rounds`'),
])
def test_resume_with_other_arguments_raises(
    processes, tmp_path, overrides, argument):
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)

  with pytest.raises(ValueError, match=argument):
    _run(_runner(processes, 'fedavg'), tmp_path, **overrides)


# Argument validation and runners.


@pytest.mark.parametrize('overrides, argument', [
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
])
def test_bad_arguments_raise_naming_the_argument_before_any_work(
    processes, tmp_path, overrides, argument):
  runner = _runner(processes, 'fedavg')

  with pytest.raises(ValueError, match=argument):
    _run(runner, tmp_path, **overrides)

  assert os.listdir(tmp_path) == []


def test_runner_without_required_methods_raises(tmp_path):
  with pytest.raises(ValueError, match='`runner`'):
    _run(object(), tmp_path)


def test_learning_process_runner_without_window_evaluates_global_model(
    processes):
  runner = training.LearningProcessRunner(processes['fedavg'])
  state, _ = runner.run_round(
      runner.initialize(), CLIENT_IDS[:2],
      [preprocess_fn(CLIENT_DATA.create_tf_dataset_for_client(c))
       for c in CLIENT_IDS[:2]])

  window = runner.window_model_weights(state)

  for actual, expected in zip(_leaves(window),
                              _leaves(state.global_model_weights)):
    np.testing.assert_array_equal(actual, expected)


def test_learning_process_runner_window_model_is_mean_of_last_two_models(
    processes):
  runner = training.LearningProcessRunner(processes['window'])
  datasets = [preprocess_fn(CLIENT_DATA.create_tf_dataset_for_client(c))
              for c in CLIENT_IDS[:2]]
  state, _ = runner.run_round(runner.initialize(), CLIENT_IDS[:2], datasets)
  first = _leaves(runner.global_model_weights(state).trainable)
  state, _ = runner.run_round(state, CLIENT_IDS[:2], datasets)
  second = _leaves(runner.global_model_weights(state).trainable)

  window = _leaves(runner.window_model_weights(state).trainable)

  for actual, a, b in zip(window, first, second):
    np.testing.assert_allclose(
        actual, (a.astype(np.float64) + b) / 2, rtol=1e-6)
  assert not np.array_equal(first[0], second[0])


def test_scaffold_runner_stores_the_returned_states_of_sampled_clients(
    processes):
  process = processes['scaffold']
  template = scaffold.initial_client_state(model_fn)
  runner = training.ScaffoldRunner(process, training.ClientStateStore(template))
  ids = [CLIENT_IDS[3], CLIENT_IDS[1]]
  datasets = [preprocess_fn(CLIENT_DATA.create_tf_dataset_for_client(c))
              for c in ids]
  _, expected_states, _ = process.next(
      process.initialize(), datasets, [template, template])

  runner.run_round(runner.initialize(), ids, datasets)

  assert runner.client_state_store.client_ids == tuple(ids)
  for actual, expected in zip(runner.client_state_store.get(ids),
                              expected_states):
    for a, e in zip(_leaves(actual), _leaves(expected)):
      np.testing.assert_array_equal(a, e)
      assert np.any(a != 0)


def test_scaffold_runner_without_window_evaluates_global_model(processes):
  runner = training.ScaffoldRunner(
      processes['scaffold'],
      training.ClientStateStore(scaffold.initial_client_state(model_fn)))
  state = runner.initialize()

  for actual, expected in zip(_leaves(runner.window_model_weights(state)),
                              _leaves(state.global_model_weights)):
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize('make_runner, argument', [
    (lambda p: training.LearningProcessRunner(p['scaffold']), '`process`'),
    (lambda p: training.ScaffoldRunner(
        p['fedavg'],
        training.ClientStateStore(scaffold.initial_client_state(model_fn))),
     '`process`'),
    (lambda p: training.ScaffoldRunner(p['scaffold'], None),
     '`client_state_store`'),
])
def test_runners_reject_wrong_arguments(processes, make_runner, argument):
  with pytest.raises(ValueError, match=argument):
    make_runner(processes)
