"""Tests for tff_fedwin.experiments.run_experiment: whole runs.

The runs use `--task=npz` on `tiny_data`'s file (200 train / 50 test
random 8x8 images, 10 classes), 6 clients, 2 per round, 3 rounds, batch 10,
eval at rounds 2 and 3, a checkpoint every round. Expected values come from
the files the run writes (the summary is recomputed from metrics.csv with
numpy, the eval metrics from the checkpointed models) and from facts that do
not depend on the implementation (accuracy over 50 examples is a multiple of
1/50; a window of one model is the global model; a resumed run ends where an
uninterrupted one does).

Each smoke case runs once per module (`smoke_runs`), also as the uninterrupted
run of the resume tests, and the runs but two run on the session's TFF worker
(session_worker.py); the uint8 and the diverging run start their own.
"""

import asyncio
import collections
import csv
import functools
import json
import os
import re
import socket

import attrs
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import choices
from tff_fedwin import experiments
from tff_fedwin.data import sources
from tff_fedwin.experiments import registry as experiments_registry
from tff_fedwin.tasks import registry
from tff_fedwin.training import divergence

from tests.experiments import session_worker
from tests.experiments import tiny_data

NUM_TEST = tiny_data.NUM_TEST
TOTAL_ROUNDS = 3
ROUNDS_PER_EVAL = 2
EVAL_ROUNDS = (2, 3)  # Multiples of ROUNDS_PER_EVAL, and the last round.
EVAL_KEYS = ('window/accuracy', 'window/loss', 'global/accuracy', 'global/loss')


def _config(data_npz, output_dir, name, **overrides):
  return tiny_data.config(
      data_npz,
      output_dir,
      name,
      **{
          'total_rounds': TOTAL_ROUNDS,
          'rounds_per_eval': ROUNDS_PER_EVAL,
          'summary_last_n': 5,
          **overrides,
      },
  )


CLIENT_STATE_ALGORITHMS = choices.CLIENT_STATE_ALGORITHMS


def _read_csv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


# One run per kind of state and output a run can have (the checks below are
# of the run's files and records; each algorithm's numbers are
# wiring_test.py's): FedYogi's run is FedAdam's with another server
# optimizer state of the same structure, and FedProx with CE is the run of
# FedProx with WSM with the model's own loss.
SMOKE_CASES = {
    'fedavg': dict(algorithm='fedavg', window_size=2),
    'fedavgm': dict(algorithm='fedavgm', window_size=2),
    'fedadam': dict(
        algorithm='fedadam', window_size=2, server_learning_rate=0.01
    ),
    'fedprox_wsm': dict(algorithm='fedprox', client_loss='wsm', window_size=2),
    'mime_lite': dict(algorithm='mime_lite', window_size=2),
    'scaffold_wsm_broadcast': dict(
        algorithm='scaffold',
        client_loss='wsm',
        window_size=2,
        window_mode='broadcast',
    ),
    'ima_broadcast': dict(
        algorithm='fedavg',
        client_lr_schedule='ima',
        window_size=2,
        window_mode='broadcast',
        window_start_round=2,
    ),
    # The model with dropout, on 28x28 images (`tiny_data`).
    'fedavg_dropout': dict(
        algorithm='fedavg', window_size=2, model='cnn_dropout'
    ),
    'scaffold_dropout_disk': dict(
        algorithm='scaffold',
        window_size=2,
        model='cnn_dropout',
        client_states='disk',
    ),
    # The client-state family beyond SCAFFOLD: AdaBest's states also hold
    # the round it last trained in (a 0-d leaf), on disk and in memory.
    'adabest_disk': dict(
        algorithm='adabest',
        adabest_mu=0.1,
        adabest_beta=0.5,
        window_size=2,
        client_states='disk',
    ),
    'adabest_memory': dict(
        algorithm='adabest',
        adabest_mu=0.1,
        adabest_beta=0.5,
        window_size=2,
        client_states='memory',
    ),
    # FedFA: a server vector not shaped like x (the anchors and the round's
    # examples) in the checkpoint; the calibration from round 3, after the
    # resume.
    'fedfa_ima': dict(
        algorithm='fedfa',
        fedfa_lambda=0.1,
        fedfa_momentum=0.5,
        fedfa_calibration_start_round=3,
        window_size=2,
        window_mode='broadcast',
    ),
}


class _SmokeRuns:
  """The run of each case of SMOKE_CASES, made when first asked for.

  Calling it with a case returns (config, returned summary, experiment
  directory); `runners[case]` is the runner that run built.
  """

  def __init__(self, data_npz, tmp_path_factory, session_context):
    self._data_npz = data_npz
    self._tmp_path_factory = tmp_path_factory
    self._session_context = session_context
    self._runs = {}
    self._dropout_npz = None
    self.runners = {}

  def __call__(self, case):
    if case not in self._runs:
      self._runs[case] = self._run(case)
    return self._runs[case]

  def data_npz(self, case):
    """The case's data: 28x28 images for `cnn_dropout`, else 8x8."""
    if SMOKE_CASES[case].get('model') != 'cnn_dropout':
      return self._data_npz
    if self._dropout_npz is None:
      self._dropout_npz = tiny_data.write_npz(
          str(self._tmp_path_factory.mktemp('data') / 'tiny28.npz'),
          tiny_data.DROPOUT_IMAGE_SHAPE,
      )
    return self._dropout_npz

  def _run(self, case):
    output_dir = self._tmp_path_factory.mktemp('smoke')
    config = _config(self.data_npz(case), output_dir, case, **SMOKE_CASES[case])
    build_runner = experiments_registry.build_runner
    built = []

    def recorded_build_runner(*args, **kwargs):
      built.append(build_runner(*args, **kwargs))
      return built[-1]

    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(experiments_registry, 'build_runner', recorded_build_runner)
      summary = session_worker.run_experiment(self._session_context, config)
    assert len(built) == 1
    self.runners[case] = built[0]
    return config, summary, os.path.join(output_dir, case)


@pytest.fixture(scope='module')
def smoke_runs(data_npz, tmp_path_factory, tff_execution_context):
  """Every smoke case's run, each made once per module (`_SmokeRuns`)."""
  return _SmokeRuns(data_npz, tmp_path_factory, tff_execution_context)


@pytest.fixture(scope='module', params=sorted(SMOKE_CASES))
def smoke_run(request, smoke_runs):
  """One run per case: (config, returned summary, experiment directory)."""
  return smoke_runs(request.param)


@pytest.fixture(scope='module')
def task_evaluator(data_npz):
  """`config -> its task's test set evaluator`, built once per task flags.

  A task built here, apart from the run's; the smoke cases share its flags.
  """

  @functools.cache
  def evaluator(task_flags):
    return registry.create_task(**dict(task_flags)).build_evaluate_fn()

  def for_config(config):
    assert config.data_npz == data_npz or config.model == 'cnn_dropout'
    return evaluator(
        (
            ('name', config.task),
            ('model', config.model),
            ('batch_size', config.client_batch_size),
            ('epochs', config.client_epochs),
            ('seed', config.seed),
            ('num_clients', config.num_clients),
            ('dirichlet_alpha', config.dirichlet_alpha),
            ('data_npz', config.data_npz),
        )
    )

  return for_config


def test_run_writes_one_csv_row_per_round(smoke_run):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  assert [int(row['round_num']) for row in rows] == list(
      range(1, TOTAL_ROUNDS + 1)
  )


@pytest.mark.parametrize('key', EVAL_KEYS)
def test_run_evaluates_exactly_at_eval_rounds(smoke_run, key):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  evaluated = [int(row['round_num']) for row in rows if row.get(key)]
  assert evaluated == list(EVAL_ROUNDS)


def _checkpointed_global_models(runner, directory, rounds):
  """`global_model_weights` of the program states of `rounds` on disk.

  `runner` (the run's; only its `initialize` runs) gives their structure.
  """
  structure = collections.OrderedDict(
      server_state=runner.initialize(),
      round_num=np.int64(0),
      seed=np.int64(0),
      clients_per_round=np.int64(0),
      num_clients=np.int64(0),
  )
  manager = tff.program.FileProgramStateManager(
      os.path.join(directory, 'checkpoints')
  )
  models = []
  for round_num in rounds:
    loaded = asyncio.run(manager.load(round_num, structure))
    assert int(loaded['round_num']) == round_num
    weights = loaded['server_state'].global_model_weights
    models.append(
        [
            np.asarray(w, np.float64)
            for w in tf.nest.flatten((weights.trainable, weights.non_trainable))
        ]
    )
  return models


def _model_weights(runner, leaves):
  """`leaves` (float64) in the structure and dtypes of the runner's model."""
  template = runner.global_model_weights(runner.initialize())
  flat = tf.nest.flatten((template.trainable, template.non_trainable))
  trainable, non_trainable = tf.nest.pack_sequence_as(
      (template.trainable, template.non_trainable),
      [np.asarray(v).astype(np.asarray(t).dtype) for v, t in zip(leaves, flat)],
  )
  return tff.learning.models.ModelWeights(trainable, non_trainable)


def test_run_eval_metrics_are_the_checkpointed_models_metrics(
    smoke_run, smoke_runs, task_evaluator
):
  # Round 3's `global/*` is the evaluation of the checkpointed w^3; in
  # evaluate mode, `window/*` that of the numpy mean of w^2 and w^3 (W = 2);
  # in broadcast mode the window model replaced w^3, so both are equal.
  config, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  last = rows[-1]
  runner = smoke_runs.runners[config.experiment_name]
  previous, current = _checkpointed_global_models(
      runner, directory, (TOTAL_ROUNDS - 1, TOTAL_ROUNDS)
  )
  evaluate = task_evaluator(config)

  expected_global = evaluate(_model_weights(runner, current))

  for name in ('accuracy', 'loss'):
    assert float(last[f'global/{name}']) == pytest.approx(
        expected_global[name], rel=1e-6
    )
  if config.window_mode == 'evaluate':
    window = [(a + b) / 2 for a, b in zip(previous, current)]
    expected_window = evaluate(_model_weights(runner, window))
    assert float(last['window/accuracy']) == pytest.approx(
        expected_window['accuracy'], abs=1e-9
    )
    assert float(last['window/loss']) == pytest.approx(
        expected_window['loss'], rel=1e-4
    )
    assert float(last['window/loss']) != float(last['global/loss'])
  else:
    for name in ('accuracy', 'loss'):
      assert float(last[f'window/{name}']) == float(last[f'global/{name}'])
  for key in EVAL_KEYS:
    values = [float(row[key]) for row in rows if row.get(key)]
    assert len(values) == len(EVAL_ROUNDS) and np.all(np.isfinite(values))


@pytest.mark.parametrize('key', ['window/accuracy', 'global/accuracy'])
def test_run_accuracy_counts_test_examples(smoke_run, key):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  correct = (
      np.array([float(row[key]) for row in rows if row.get(key)]) * NUM_TEST
  )
  np.testing.assert_allclose(correct, np.round(correct), atol=1e-6)


@pytest.mark.parametrize('key', EVAL_KEYS)
def test_run_summary_json_mean_is_mean_of_csv(smoke_run, key):
  config, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  values = [float(row[key]) for row in rows if row.get('window/accuracy')][
      -config.summary_last_n :
  ]
  with open(os.path.join(directory, 'summary.json')) as f:
    summary = json.load(f)
  prefix, name = key.split('/')
  assert summary[prefix][name]['mean'] == pytest.approx(
      np.mean(values), rel=1e-12, abs=0
  )


def test_run_summary_json_is_the_returned_summary(smoke_run):
  _, returned, directory = smoke_run
  with open(os.path.join(directory, 'summary.json')) as f:
    assert json.load(f) == json.loads(json.dumps(returned))


def test_run_config_records_the_learning_rates_trained_with(smoke_run):
  # tiny_data sets client lr 0.05; the server lr is unset but in the FedAdam
  # case (0.01): an image task's default, 1.0, is recorded, not "unset"
  # (tff_fedwin.experiments.task_defaults).
  config, _, directory = smoke_run
  with open(os.path.join(directory, 'run_config.json')) as f:
    recorded = json.load(f)['config']
  server = 0.01 if config.algorithm == 'fedadam' else 1.0
  assert (
      recorded['client_learning_rate'],
      recorded['server_learning_rate'],
  ) == (0.05, server)


def test_run_checkpoints_the_last_round(smoke_run):
  config, _, directory = smoke_run
  expected = [f'program_state_{TOTAL_ROUNDS}/saved_model.pb']
  # The client states are checkpointed too: in a file of their own, or in
  # the disk store's directory (tests/training/disk_client_states_test.py).
  if config.algorithm in CLIENT_STATE_ALGORITHMS and (
      config.client_states != 'disk'
  ):
    expected.append(f'client_states_{TOTAL_ROUNDS}.npz')
  present = [
      name
      for name in expected
      if os.path.isfile(os.path.join(directory, 'checkpoints', name))
  ]
  assert present == expected


def test_scaffold_client_states_go_through_files_by_default(smoke_run):
  # Local workers: --client_state_transfer=auto is 'files', in the run dir
  # (one c_i file per client and weight tensor, in and out; the smoke run
  # has no wider rounds than its clients per round).
  config, _, directory = smoke_run
  files_dir = os.path.join(directory, 'client_state_files')
  if config.algorithm not in CLIENT_STATE_ALGORITHMS:
    assert not os.path.exists(files_dir)
    return
  names = os.listdir(files_dir)
  assert any('.in.' in n for n in names) and any('.out.' in n for n in names)
  assert os.stat(files_dir).st_mode & 0o777 == 0o700


def test_client_data_bundle_is_removed_when_the_run_ends(smoke_run):
  # Local workers: --client_data_transfer=auto is 'files': the examples were
  # written to client_data/ at the start (tests/experiments/registry_test.py)
  # and are derived data, rewritten at every start.
  _, _, directory = smoke_run
  assert os.path.isdir(directory)
  assert not os.path.exists(os.path.join(directory, 'client_data'))


def test_server_state_goes_through_files_by_default(smoke_run):
  # Local workers: --server_state_transfer=auto is 'files', in the run dir:
  # both sets of leaf files once two rounds have run (one written by the
  # driver for round 1, the other by the worker; then alternating).
  _, _, directory = smoke_run
  files_dir = os.path.join(directory, 'server_state_files')
  names = os.listdir(files_dir)
  assert any(n.startswith('server_state.a.') for n in names)
  assert any(n.startswith('server_state.b.') for n in names)
  assert os.stat(files_dir).st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    'algorithm, client_loss',
    [
        ('fedavg', 'ce'),  # build_fed_win's exact finalizer window.
        ('fedprox', 'ce'),  # WindowedModelAveragingFactory as TFF aggregator.
        ('scaffold', 'wsm'),  # SCAFFOLD's window.
    ],
)
def test_window_of_one_model_evaluates_as_global_model(
    data_npz, tmp_path, tff_execution_context, algorithm, client_loss
):
  name = f'w1_{algorithm}'
  session_worker.run_experiment(
      tff_execution_context,
      _config(
          data_npz,
          tmp_path,
          name,
          algorithm=algorithm,
          client_loss=client_loss,
          window_size=1,
          window_mode='evaluate',
          total_rounds=2,
          rounds_per_eval=1,
      ),
  )
  rows = _read_csv(os.path.join(tmp_path, name, 'metrics.csv'))
  for metric in ('accuracy', 'loss'):
    window = [float(row[f'window/{metric}']) for row in rows]
    global_ = [float(row[f'global/{metric}']) for row in rows]
    assert len(window) == 2
    assert window == global_


# Case -> (the smoke case of the same flags, whose run is the uninterrupted
# one; how its first part stops: a finished run of 2 rounds extended by
# `total_rounds=3`, or a run of 3 stopped after round 2). What a resume restores
# is the state's structure, whichever way the first part stopped: each case
# stops one way, and each way is taken by both client-state stores (disk:
# scaffold_dropout_disk stops, adabest_disk is extended; memory: adabest_memory
# stops, scaffold_wsm_broadcast is extended) and by a window broadcast to the
# clients (fedfa_ima stops, scaffold_wsm_broadcast is extended).
RESUME_CASES = {
    'fedavgm_window': ('fedavgm', 'total_rounds'),  # window_size=2.
    'scaffold_wsm_broadcast': ('scaffold_wsm_broadcast', 'total_rounds'),
    'fedavg_dropout': ('fedavg_dropout', 'stop_after_round'),
    'scaffold_dropout_disk': ('scaffold_dropout_disk', 'stop_after_round'),
    'adabest_disk': ('adabest_disk', 'total_rounds'),
    'adabest_memory': ('adabest_memory', 'stop_after_round'),
    'fedfa_ima': ('fedfa_ima', 'stop_after_round'),
}
# Every column but the timings: what the run trained and evaluated.
TIMING_COLUMNS = ('round_time_seconds', 'eval_time_seconds')


def _numbers(rows):
  return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


@pytest.mark.parametrize('case', sorted(RESUME_CASES))
def test_resumed_run_ends_like_uninterrupted_run(
    tmp_path, smoke_runs, tff_execution_context, case
):
  # Stopped after round 2 (a run of 2 rounds, or of 3 stopped at 2), resumed.
  # Its first part is a second fresh run of the same flags: every number of
  # every row equals the uninterrupted run's (the masks of the dropout cases
  # included; Keras' stateful `Dropout` differed from round 1 on).
  name, stop = RESUME_CASES[case]
  straight_config, _, straight_dir = smoke_runs(name)
  assert straight_config.total_rounds == 3
  resumed_config = _config(
      smoke_runs.data_npz(name),
      tmp_path / 'resumed',
      name,
      total_rounds=3,
      **SMOKE_CASES[name],
  )
  run = functools.partial(session_worker.run_experiment, tff_execution_context)
  if stop == 'total_rounds':
    first = run(attrs.evolve(resumed_config, total_rounds=2))
  else:
    first = run(resumed_config, stop_after_round=2)
  summary = run(resumed_config)
  assert first['total_rounds'] == 2
  assert summary['resumed_from_round'] == 2
  straight = _read_csv(os.path.join(straight_dir, 'metrics.csv'))
  resumed = _read_csv(tmp_path / 'resumed' / name / 'metrics.csv')
  assert [row['round_num'] for row in resumed] == ['1', '2', '3']
  assert _numbers(resumed) == _numbers(straight)
  assert set(EVAL_KEYS) < set(resumed[-1])


@pytest.mark.parametrize('stop_after_round', [-1, 3, 4])
def test_stop_after_round_outside_the_run_is_refused(
    data_npz, tmp_path, stop_after_round
):
  with pytest.raises(ValueError, match=r'must be 0 or in \[1, 3\)'):
    experiments.run_experiment(
        _config(data_npz, tmp_path, 'x'), stop_after_round=stop_after_round
    )


def test_uint8_images_learn_after_scaling(tmp_path):
  # 2,000 MNIST training images stored as uint8 pixels 0-255, as most image
  # sets ship. Unscaled they made the CNN diverge to chance (0.10); scaled to
  # [0, 1], 5 FedAvg rounds of 5 clients reach 0.61 here. 0.4 is far above
  # chance and below what a learning run reaches.
  (x_train, y_train), (x_test, y_test) = sources.load_mnist()
  to_uint8 = lambda x: np.round(x * 255).astype(np.uint8)
  path = str(tmp_path / 'mnist_uint8.npz')
  np.savez(
      path,
      x_train=to_uint8(x_train[:2000]),
      y_train=y_train[:2000],
      x_test=to_uint8(x_test[:500]),
      y_test=y_test[:500],
  )
  summary = experiments.run_experiment(
      experiments.ExperimentConfig(
          task='npz',
          data_npz=path,
          num_clients=10,
          dirichlet_alpha=1.0,
          clients_per_round=5,
          total_rounds=5,
          rounds_per_eval=5,
          client_batch_size=20,
          client_learning_rate=0.05,
          root_output_dir=str(tmp_path),
          experiment_name='uint8',
      )
  )
  assert summary['global']['accuracy']['mean'] > 0.4


def test_diverging_run_stops_at_the_round_with_checkpoint_intact(
    data_npz, tmp_path
):
  config = _config(
      data_npz, tmp_path, 'diverge', client_learning_rate=1e30, total_rounds=3
  )
  with pytest.raises(
      divergence.TrainingDivergedError,
      match=r'^diverge: \S+ is .* at round \d+; stopped before recording',
  ) as raised:
    experiments.run_experiment(config)
  stopped = raised.value.round_num
  rows = (
      _read_csv(tmp_path / 'diverge' / 'metrics.csv')
      if os.path.exists(tmp_path / 'diverge' / 'metrics.csv')
      else []
  )
  # Rounds before the stop are recorded, finite; the stopped one is not.
  assert [int(row['round_num']) for row in rows] == list(range(1, stopped))
  checkpoints = os.listdir(tmp_path / 'diverge' / 'checkpoints')
  assert f'program_state_{stopped - 1}' in checkpoints
  assert f'program_state_{stopped}' not in checkpoints
  assert f'checkpoint of round {stopped - 1} is intact' in str(raised.value)


def test_failed_download_names_the_offline_flags(tmp_path, monkeypatch):
  def no_network(*args, **kwargs):
    del args, kwargs
    raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')

  monkeypatch.setattr(socket, 'getaddrinfo', no_network)
  config = experiments.ExperimentConfig(
      task='emnist',
      cache_dir=str(tmp_path / 'cache'),
      root_output_dir=str(tmp_path / 'out'),
  )
  with pytest.raises(
      registry.DataUnavailableError,
      match=re.escape('(flags: --cache_dir, --use_synthetic_data)') + '$',
  ) as raised:
    experiments.run_experiment(config)
  message = str(raised.value)
  assert '\n' not in message
  assert not (tmp_path / 'out').exists()  # Before any worker or output.


def test_more_clients_per_round_than_the_data_has_is_an_input_error(tmp_path):
  config = experiments.ExperimentConfig(
      task='emnist',
      use_synthetic_data=True,
      clients_per_round=10_000,
      root_output_dir=str(tmp_path),
  )
  with pytest.raises(experiments.InputDataError, match='--clients_per_round'):
    experiments.run_experiment(config)
  assert not os.listdir(tmp_path)  # Before any worker or output.
