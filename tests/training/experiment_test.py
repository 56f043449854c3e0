"""Tests for tff_fedwin.training.experiment: config checks and whole runs.

The runs use `--task=npz` on a tiny file written here (200 train / 50 test
random 8x8 images, 10 classes), 6 clients, 2 per round, 3 rounds, batch 10,
eval at rounds 2 and 3. Expected values come from the files the run writes
(the summary is recomputed from metrics.csv with numpy) and from facts that do
not depend on the implementation (accuracy over 50 examples is a multiple of
1/50; a window of one model is the global model; a resumed run ends where an
uninterrupted one does).
"""

import csv
import json
import os
import socket

import attrs
import numpy as np
import pytest

from tff_fedwin.data import sources
from tff_fedwin.tasks import registry
from tff_fedwin.training import divergence
from tff_fedwin.training import experiment

NUM_TRAIN = 200
NUM_TEST = 50
IMAGE_SHAPE = (8, 8)
NUM_CLASSES = 10
TOTAL_ROUNDS = 3
ROUNDS_PER_EVAL = 2
EVAL_ROUNDS = (2, 3)  # Multiples of ROUNDS_PER_EVAL, and the last round.
EVAL_KEYS = ('window/accuracy', 'window/loss', 'global/accuracy',
             'global/loss')

# A valid configuration the table below breaks one field (or two) at a time.
BASE = experiment.ExperimentConfig(
    task='npz', data_npz='data.npz', num_clients=10, clients_per_round=2,
    total_rounds=10)


def _fails(name, flags, **overrides):
  return pytest.param(overrides, flags, id=name)


BAD_CONFIGS = [
    _fails('unknown_task', ['--task'], task='cifar10', data_npz=None),
    _fails('unknown_algorithm', ['--algorithm'], algorithm='fedsgd'),
    _fails('unknown_client_loss', ['--client_loss'], client_loss='focal'),
    _fails('unknown_window_mode', ['--window_mode'], window_size=2,
           window_mode='average'),
    _fails('unknown_lr_schedule', ['--client_lr_schedule'],
           client_lr_schedule='cosine'),
    _fails('window_start_after_last_round',
           ['--window_start_round', '--total_rounds'], window_size=2,
           window_start_round=11),
    _fails('more_clients_per_round_than_clients',
           ['--clients_per_round', '--num_clients'], clients_per_round=11),
    _fails('client_lr_zero', ['--client_learning_rate'],
           client_learning_rate=0.0),
    _fails('client_lr_negative', ['--client_learning_rate'],
           client_learning_rate=-0.1),
    _fails('server_lr_zero', ['--server_learning_rate'],
           server_learning_rate=0.0),
    _fails('server_lr_negative', ['--server_learning_rate'],
           server_learning_rate=-1.0),
    _fails('window_mode_without_window_size',
           ['--window_mode', '--window_size'], window_mode='broadcast'),
    _fails('window_start_round_without_window_size',
           ['--window_start_round', '--window_size'], window_start_round=3),
    _fails('window_read_every_without_window_size',
           ['--window_read_every', '--window_size'], window_read_every=2),
    _fails('eval_rounds_not_multiple_of_read_every',
           ['--rounds_per_eval', '--window_read_every'], window_size=4,
           window_read_every=2, rounds_per_eval=3),
    _fails('total_rounds_not_multiple_of_read_every',
           ['--total_rounds', '--window_read_every'], window_size=4,
           window_read_every=3, rounds_per_eval=3),
    _fails('broadcast_reads_every_second_round', ['--window_read_every'],
           window_size=4, window_mode='broadcast', window_read_every=2),
    _fails('wsm_on_shakespeare', ['--client_loss', '--task'],
           task='shakespeare', data_npz=None, client_loss='wsm'),
    _fails('wsm_on_stackoverflow', ['--client_loss', '--task'],
           task='stackoverflow', data_npz=None, client_loss='wsm'),
    _fails('ima_with_scaffold', ['--client_lr_schedule', '--algorithm'],
           algorithm='scaffold', client_lr_schedule='ima'),
    _fails('ima_with_fedprox', ['--client_lr_schedule', '--algorithm'],
           algorithm='fedprox', client_lr_schedule='ima'),
    _fails('ima_with_mime_lite', ['--client_lr_schedule', '--algorithm'],
           algorithm='mime_lite', client_lr_schedule='ima'),
    _fails('mime_lite_with_wsm', ['--algorithm', '--client_loss'],
           algorithm='mime_lite', client_loss='wsm'),
    _fails('fedprox_window_needs_server_lr_1', ['--server_learning_rate'],
           algorithm='fedprox', window_size=2, server_learning_rate=0.5),
    _fails('npz_without_data_npz', ['--data_npz'], data_npz=None),
    _fails('npz_with_empty_data_npz', ['--data_npz'], data_npz=''),
    _fails('data_npz_with_mnist', ['--data_npz'], task='mnist'),
    _fails('total_rounds_zero', ['--total_rounds'], total_rounds=0),
    _fails('total_rounds_not_int', ['--total_rounds'], total_rounds=2.5),
    _fails('total_rounds_bool', ['--total_rounds'], total_rounds=True),
    _fails('clients_per_round_zero', ['--clients_per_round'],
           clients_per_round=0),
    _fails('client_epochs_zero', ['--client_epochs'], client_epochs=0),
    _fails('client_batch_size_zero', ['--client_batch_size'],
           client_batch_size=0),
    _fails('rounds_per_eval_zero', ['--rounds_per_eval'], rounds_per_eval=0),
    _fails('rounds_per_checkpoint_zero', ['--rounds_per_checkpoint'],
           rounds_per_checkpoint=0),
    _fails('num_clients_zero', ['--num_clients'], num_clients=0,
           clients_per_round=1),
    _fails('summary_last_n_zero', ['--summary_last_n'], summary_last_n=0),
    _fails('window_read_every_zero', ['--window_read_every'], window_size=2,
           window_read_every=0),
    _fails('window_size_negative', ['--window_size'], window_size=-1),
    _fails('window_start_round_negative', ['--window_start_round'],
           window_size=2, window_start_round=-1),
    _fails('seed_negative', ['--seed'], seed=-1),
    _fails('dirichlet_alpha_negative', ['--dirichlet_alpha'],
           dirichlet_alpha=-0.5),
    _fails('proximal_strength_negative', ['--proximal_strength'],
           algorithm='fedprox', proximal_strength=-0.01),
    _fails('workers_zero', ['--workers'], workers='0'),
    _fails('workers_word', ['--workers'], workers='many'),
    _fails('workers_negative', ['--workers'], workers='-2'),
    _fails('workers_no_port', ['--workers'], workers='localhost:'),
    _fails('workers_no_host', ['--workers'], workers=':8000'),
    _fails('workers_port_not_number', ['--workers'], workers='localhost:http'),
    _fails('workers_empty_entry', ['--workers'],
           workers='localhost:8000,,localhost:8001'),
    _fails('workers_port_above_65535', ['--workers'], workers='host:99999'),
    _fails('workers_port_zero', ['--workers'], workers='host:0'),
    _fails('workers_host_with_space', ['--workers'], workers='my host:8000'),
    _fails('unknown_worker_bind', ['--worker_bind'], worker_bind='public'),
    _fails('worker_bind_all_with_running_workers', ['--worker_bind'],
           worker_bind='all', workers='localhost:8000'),
    _fails('window_larger_than_total_rounds',
           ['--window_size', '--total_rounds'], window_size=11),
    _fails('window_read_every_with_scaffold',
           ['--window_read_every', '--algorithm'], algorithm='scaffold',
           window_size=4, window_read_every=2, rounds_per_eval=2),
    _fails('experiment_name_with_slash', ['--experiment_name'],
           experiment_name='runs/a'),
    _fails('experiment_name_parent', ['--experiment_name'],
           experiment_name='..'),
    _fails('experiment_name_empty', ['--experiment_name'], experiment_name=''),
]

GOOD_CONFIGS = [
    pytest.param({}, id='base'),
    pytest.param(dict(task='mnist', data_npz=None), id='defaults_on_mnist'),
    pytest.param(dict(window_size=2, window_start_round=10),
                 id='window_start_at_last_round'),
    pytest.param(dict(window_size=4, window_read_every=2, rounds_per_eval=2),
                 id='window_read_every_2'),
    pytest.param(dict(window_size=3, window_mode='broadcast',
                      window_start_round=5, client_lr_schedule='ima'),
                 id='ima_broadcast'),
    pytest.param(dict(algorithm='scaffold', client_loss='wsm', window_size=2,
                      window_mode='broadcast'), id='scaffold_wsm_broadcast'),
    pytest.param(dict(algorithm='fedprox', window_size=2), id='fedprox_window'),
    pytest.param(dict(algorithm='fedprox', client_loss='wsm', window_size=2,
                      server_learning_rate=0.5),
                 id='fedprox_wsm_window_server_lr'),
    pytest.param(dict(algorithm='fedadam', server_learning_rate=0.01),
                 id='fedadam'),
    pytest.param(dict(task='emnist', data_npz=None, client_loss='wsm',
                      use_synthetic_data=True), id='wsm_on_emnist'),
    pytest.param(dict(task='shakespeare', data_npz=None), id='shakespeare'),
    pytest.param(dict(clients_per_round=10), id='all_clients_per_round'),
    pytest.param(dict(dirichlet_alpha=0.0), id='one_class_per_client'),
    pytest.param(dict(workers='2'), id='two_local_workers'),
    pytest.param(dict(workers='localhost:8000, 127.0.0.1:8001'),
                 id='remote_workers'),
    pytest.param(dict(window_size=10), id='window_as_long_as_the_run'),
    pytest.param(dict(worker_bind='all'), id='worker_bind_all'),
    pytest.param(dict(workers='2', worker_bind='all'),
                 id='two_local_workers_on_all_interfaces'),
]


@pytest.mark.parametrize('overrides, flags', BAD_CONFIGS)
def test_validate_config_names_the_flag(overrides, flags):
  config = attrs.evolve(BASE, **overrides)
  with pytest.raises(ValueError) as raised:
    experiment.validate_config(config)
  for flag in flags:
    assert flag in str(raised.value)


@pytest.mark.parametrize('overrides', GOOD_CONFIGS)
def test_validate_config_accepts(overrides):
  experiment.validate_config(attrs.evolve(BASE, **overrides))


@pytest.mark.parametrize('workers, expected', [
    ('', (None, ())),
    ('   ', (None, ())),
    ('3', (3, ())),
    (' 12 ', (12, ())),
    ('a:1,b:2', (None, ('a:1', 'b:2'))),
    ('a:1 , b:2', (None, ('a:1', 'b:2'))),
    ('[::1]:8000', (None, ('[::1]:8000',))),
    ('10.0.0.2:1,host-b.example:65535', (None, ('10.0.0.2:1',
                                                 'host-b.example:65535'))),
])
def test_parse_workers(workers, expected):
  assert experiment.parse_workers(workers) == expected


@pytest.mark.parametrize('workers', [
    '0', '00', '-1', '1.5', 'a', 'a:', ':1', 'a:1,', 'a:1,b', 'a:x', 'a:1:',
    'a:0', 'a:65536', 'a:99999', 'a b:1', 'a/b:1', '[::1:8000', 'a:-1'])
def test_parse_workers_rejects(workers):
  with pytest.raises(ValueError, match='--workers'):
    experiment.parse_workers(workers)


# Whole runs.


@pytest.fixture(scope='module')
def data_npz(tmp_path_factory):
  rng = np.random.default_rng(7)
  path = str(tmp_path_factory.mktemp('data') / 'tiny.npz')
  y_train = np.arange(NUM_TRAIN) % NUM_CLASSES  # Every class present.
  y_test = np.arange(NUM_TEST) % NUM_CLASSES
  # Class-dependent brightness, so the task is learnable at all.
  x_train = rng.random((NUM_TRAIN, *IMAGE_SHAPE)) + y_train[:, None, None] / 5
  x_test = rng.random((NUM_TEST, *IMAGE_SHAPE)) + y_test[:, None, None] / 5
  np.savez(path, x_train=x_train.astype(np.float32), y_train=y_train,
           x_test=x_test.astype(np.float32), y_test=y_test)
  return path


def _config(data_npz, output_dir, name, **overrides):
  kwargs = dict(
      task='npz', data_npz=data_npz, num_clients=6, dirichlet_alpha=1.0,
      clients_per_round=2, total_rounds=TOTAL_ROUNDS, client_batch_size=10,
      client_learning_rate=0.05, rounds_per_eval=ROUNDS_PER_EVAL,
      rounds_per_checkpoint=1, summary_last_n=5,
      root_output_dir=str(output_dir), experiment_name=name)
  kwargs.update(overrides)
  return experiment.ExperimentConfig(**kwargs)


def _read_csv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


SMOKE_CASES = {
    'fedavg': dict(algorithm='fedavg', window_size=2),
    'fedavgm': dict(algorithm='fedavgm', window_size=2),
    'fedadam': dict(algorithm='fedadam', window_size=2,
                    server_learning_rate=0.01),
    'fedyogi': dict(algorithm='fedyogi', window_size=2,
                    server_learning_rate=0.01),
    'fedprox_ce': dict(algorithm='fedprox', window_size=2),
    'fedprox_wsm': dict(algorithm='fedprox', client_loss='wsm',
                        window_size=2),
    'mime_lite': dict(algorithm='mime_lite', window_size=2),
    'scaffold_wsm_broadcast': dict(algorithm='scaffold', client_loss='wsm',
                                   window_size=2, window_mode='broadcast'),
    'ima_broadcast': dict(algorithm='fedavg', client_lr_schedule='ima',
                          window_size=2, window_mode='broadcast',
                          window_start_round=2),
}


@pytest.fixture(scope='module', params=sorted(SMOKE_CASES))
def smoke_run(request, data_npz, tmp_path_factory):
  """One run per case: (config, returned summary, experiment directory)."""
  output_dir = tmp_path_factory.mktemp('smoke')
  config = _config(data_npz, output_dir, request.param,
                   **SMOKE_CASES[request.param])
  summary = experiment.run_experiment(config)
  return config, summary, os.path.join(output_dir, request.param)


def test_run_writes_one_csv_row_per_round(smoke_run):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  assert [int(row['round_num']) for row in rows] == list(
      range(1, TOTAL_ROUNDS + 1))


@pytest.mark.parametrize('key', EVAL_KEYS)
def test_run_evaluates_exactly_at_eval_rounds(smoke_run, key):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  evaluated = [int(row['round_num']) for row in rows if row.get(key)]
  assert evaluated == list(EVAL_ROUNDS)


@pytest.mark.parametrize('key', EVAL_KEYS)
def test_run_eval_metrics_are_finite(smoke_run, key):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  values = [float(row[key]) for row in rows if row.get(key)]
  assert values and np.all(np.isfinite(values))


@pytest.mark.parametrize('key', ['window/accuracy', 'global/accuracy'])
def test_run_accuracy_counts_test_examples(smoke_run, key):
  _, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  correct = np.array([float(row[key]) for row in rows if row.get(key)
                     ]) * NUM_TEST
  np.testing.assert_allclose(correct, np.round(correct), atol=1e-6)


@pytest.mark.parametrize('key', EVAL_KEYS)
def test_run_summary_json_mean_is_mean_of_csv(smoke_run, key):
  config, _, directory = smoke_run
  rows = _read_csv(os.path.join(directory, 'metrics.csv'))
  values = [float(row[key]) for row in rows
            if row.get('window/accuracy')][-config.summary_last_n:]
  with open(os.path.join(directory, 'summary.json')) as f:
    summary = json.load(f)
  prefix, name = key.split('/')
  assert summary[prefix][name]['mean'] == pytest.approx(
      np.mean(values), rel=1e-12, abs=0)


def test_run_summary_json_is_the_returned_summary(smoke_run):
  _, returned, directory = smoke_run
  with open(os.path.join(directory, 'summary.json')) as f:
    assert json.load(f) == json.loads(json.dumps(returned))


def test_run_checkpoints_the_last_round(smoke_run):
  config, _, directory = smoke_run
  expected = [f'program_state_{TOTAL_ROUNDS}/saved_model.pb']
  if config.algorithm == 'scaffold':  # The client states are checkpointed too.
    expected.append(f'client_states_{TOTAL_ROUNDS}.npz')
  present = [name for name in expected
             if os.path.isfile(os.path.join(directory, 'checkpoints', name))]
  assert present == expected


@pytest.mark.parametrize('algorithm, client_loss', [
    ('fedavg', 'ce'),      # build_fed_win's exact finalizer window.
    ('fedprox', 'ce'),     # WindowedModelAveragingFactory as TFF aggregator.
    ('scaffold', 'wsm'),   # SCAFFOLD's window.
])
def test_window_of_one_model_evaluates_as_global_model(
    data_npz, tmp_path, algorithm, client_loss):
  name = f'w1_{algorithm}'
  experiment.run_experiment(_config(
      data_npz, tmp_path, name, algorithm=algorithm, client_loss=client_loss,
      window_size=1, window_mode='evaluate', total_rounds=2,
      rounds_per_eval=1))
  rows = _read_csv(os.path.join(tmp_path, name, 'metrics.csv'))
  for metric in ('accuracy', 'loss'):
    window = [float(row[f'window/{metric}']) for row in rows]
    global_ = [float(row[f'global/{metric}']) for row in rows]
    assert len(window) == 2
    assert window == global_


RESUME_CASES = {
    'fedavgm_window': dict(algorithm='fedavgm', window_size=2),
    'scaffold_wsm_broadcast': dict(algorithm='scaffold', client_loss='wsm',
                                   window_size=2, window_mode='broadcast'),
}


@pytest.mark.parametrize('case', sorted(RESUME_CASES))
def test_resumed_run_ends_like_uninterrupted_run(data_npz, tmp_path, case):
  overrides = RESUME_CASES[case]
  experiment.run_experiment(_config(
      data_npz, tmp_path / 'straight', case, total_rounds=3, **overrides))
  experiment.run_experiment(_config(
      data_npz, tmp_path / 'resumed', case, total_rounds=2, **overrides))
  summary = experiment.run_experiment(_config(
      data_npz, tmp_path / 'resumed', case, total_rounds=3, **overrides))
  assert summary['resumed_from_round'] == 2
  straight = _read_csv(tmp_path / 'straight' / case / 'metrics.csv')
  resumed = _read_csv(tmp_path / 'resumed' / case / 'metrics.csv')
  assert [row['round_num'] for row in resumed] == ['1', '2', '3']
  for key in EVAL_KEYS:
    assert float(resumed[-1][key]) == float(straight[-1][key]), key


def test_uint8_images_learn_after_scaling(tmp_path):
  # 2,000 MNIST training images stored as uint8 pixels 0-255, as most image
  # sets ship. Unscaled they made the CNN diverge to chance (0.10); scaled to
  # [0, 1], 5 FedAvg rounds of 5 clients reach 0.61 here. 0.4 is far above
  # chance and below what a learning run reaches.
  (x_train, y_train), (x_test, y_test) = sources.load_mnist()
  to_uint8 = lambda x: np.round(x * 255).astype(np.uint8)
  path = str(tmp_path / 'mnist_uint8.npz')
  np.savez(path, x_train=to_uint8(x_train[:2000]), y_train=y_train[:2000],
           x_test=to_uint8(x_test[:500]), y_test=y_test[:500])
  summary = experiment.run_experiment(experiment.ExperimentConfig(
      task='npz', data_npz=path, num_clients=10, dirichlet_alpha=1.0,
      clients_per_round=5, total_rounds=5, rounds_per_eval=5,
      client_batch_size=20, client_learning_rate=0.05,
      root_output_dir=str(tmp_path), experiment_name='uint8'))
  assert summary['global']['accuracy']['mean'] > 0.4


def test_diverging_run_stops_at_the_round_with_checkpoint_intact(
    data_npz, tmp_path):
  config = _config(data_npz, tmp_path, 'diverge', client_learning_rate=1e30,
                   total_rounds=3)
  with pytest.raises(divergence.TrainingDivergedError) as raised:
    experiment.run_experiment(config)
  stopped = raised.value.round_num
  rows = _read_csv(tmp_path / 'diverge' / 'metrics.csv') if os.path.exists(
      tmp_path / 'diverge' / 'metrics.csv') else []
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
  config = experiment.ExperimentConfig(
      task='emnist', cache_dir=str(tmp_path / 'cache'),
      root_output_dir=str(tmp_path / 'out'))
  with pytest.raises(registry.DataUnavailableError) as raised:
    experiment.run_experiment(config)
  message = str(raised.value)
  assert '\n' not in message
  assert message.endswith('(flags: --cache_dir, --use_synthetic_data)')
  assert not (tmp_path / 'out').exists()  # Before any worker or output.


def test_more_clients_per_round_than_the_data_has_is_an_input_error(
    tmp_path):
  config = experiment.ExperimentConfig(
      task='emnist', use_synthetic_data=True, clients_per_round=10_000,
      root_output_dir=str(tmp_path))
  with pytest.raises(experiment.InputDataError, match='--clients_per_round'):
    experiment.run_experiment(config)
  assert not os.listdir(tmp_path)  # Before any worker or output.
