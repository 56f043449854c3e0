"""Tests for tff_fedwin.experiments.registry: one runner builder per algorithm.

What each builder's process computes is tested by its effect on the numbers
in tests/experiments/wiring_test.py; here, that the registry covers the flag's
choices and that `build_runner` dispatches on `config.algorithm`.
"""

import os
import re

import attrs
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests.experiments import tiny_data
from tff_fedwin import data
from tff_fedwin import experiments
from tff_fedwin import round_runner
from tff_fedwin.algorithms import swa_runner
from tff_fedwin.experiments import algorithm_parts
from tff_fedwin.experiments import registry
from tff_fedwin.experiments import run as run_lib


def test_registry_has_a_builder_for_every_algorithm_flag_value():
  assert tuple(registry.RUNNER_BUILDERS) == experiments.ALGORITHMS


def test_transfer_dirs_without_shared_dir_are_in_the_run_directory():
  config = experiments.ExperimentConfig(
      root_output_dir='/out', experiment_name='run'
  )
  # The run id does not matter there: the run directory is the run's own.
  for run_id in (None, 'a' * 32):
    assert registry.transfer_dirs(config, run_id) == registry.TransferDirs(
        root='/out/run',
        client_state_files='/out/run/client_state_files',
        server_state_files='/out/run/server_state_files',
        client_data='/out/run/client_data',
    )


def test_runs_sharing_shared_dir_and_name_get_their_own_dirs():
  # Two drivers on two hosts: the same default root, name and shared mount.
  config = experiments.ExperimentConfig(
      root_output_dir='/tmp/fedwin',
      experiment_name='run',
      shared_dir='/mnt/shared',
  )
  one = registry.transfer_dirs(config, '0123456789abcdef0123456789abcdef')
  other = registry.transfer_dirs(config, 'fedcba9876543210fedcba9876543210')
  root = '/mnt/shared/run-0123456789abcdef0123456789abcdef'
  assert one == registry.TransferDirs(
      root=root,
      client_state_files=f'{root}/client_state_files',
      server_state_files=f'{root}/server_state_files',
      client_data=f'{root}/client_data',
  )
  assert other.root == '/mnt/shared/run-fedcba9876543210fedcba9876543210'
  assert not set(one) & set(other)


@pytest.mark.parametrize('run_id', [None, '', '../x', '..'])
def test_transfer_dirs_in_shared_dir_need_a_run_id(run_id):
  config = experiments.ExperimentConfig(shared_dir='/mnt/shared')
  with pytest.raises(
      ValueError,
      match=f'named by its run id .*; got {re.escape(repr(run_id))}[.]$',
  ):
    registry.transfer_dirs(config, run_id)


def test_registry_is_read_only():
  with pytest.raises(TypeError, match='does not support item assignment'):
    registry.RUNNER_BUILDERS['fedsgd'] = None


@pytest.mark.parametrize('algorithm', experiments.ALGORITHMS)
def test_build_runner_calls_the_builder_of_the_algorithm(
    algorithm, monkeypatch
):
  calls = []

  def builder_of(name):
    def build(config, task, num_train_clients, dirs):
      calls.append((name, config, task, num_train_clients, dirs))
      return f'runner of {name}'

    return build

  monkeypatch.setattr(
      registry,
      'RUNNER_BUILDERS',
      {name: builder_of(name) for name in experiments.ALGORITHMS},
  )
  config = experiments.ExperimentConfig(
      algorithm=algorithm, client_learning_rate=0.5, server_learning_rate=0.3
  )

  runner = registry.build_runner(config, 'task', 7)

  assert runner == f'runner of {algorithm}'
  assert calls == [
      (algorithm, config, 'task', 7, registry.transfer_dirs(config))
  ]
  # Unset rates reach the builder as the task's defaults (an image task's:
  # 0.05 and 1.0, task_defaults).
  calls.clear()
  registry.build_runner(
      experiments.ExperimentConfig(algorithm=algorithm), 'task', 7
  )
  ((_, built, _, _, _),) = calls
  assert (built.client_learning_rate, built.server_learning_rate) == (0.05, 1.0)


@pytest.mark.parametrize(
    'algorithm, hparams, optimizer, epsilon',
    [
        ('fedavg', dict(learning_rate=0.25), 'sgd', None),
        ('fedavgm', dict(learning_rate=0.25, momentum=0.9), 'sgd', None),
        ('fedprox', dict(learning_rate=0.25), 'sgd', None),
        # Unset epsilon: TFF's own, 1e-7 for Adam, 1e-3 for Yogi.
        (
            'fedadam',
            dict(learning_rate=0.25, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
            'adam',
            None,
        ),
        (
            'fedyogi',
            dict(learning_rate=0.25, beta_1=0.9, beta_2=0.999, epsilon=1e-3),
            'yogi',
            None,
        ),
        (
            'fedadam',
            dict(learning_rate=0.25, beta_1=0.9, beta_2=0.999, epsilon=1e-5),
            'adam',
            1e-5,
        ),
        (
            'fedyogi',
            dict(learning_rate=0.25, beta_1=0.9, beta_2=0.999, epsilon=0.5),
            'yogi',
            0.5,
        ),
    ],
)
def test_server_optimizer_of_the_algorithm(
    algorithm, hparams, optimizer, epsilon
):
  config = experiments.ExperimentConfig(
      algorithm=algorithm, server_learning_rate=0.25, server_epsilon=epsilon
  )

  built = algorithm_parts.server_optimizer(config)

  state = built.initialize(tf.TensorSpec([2], tf.float32))
  actual = {k: float(v) for k, v in built.get_hparams(state).items()}
  assert actual == pytest.approx(hparams)
  assert optimizer in type(built).__name__.lower()


@pytest.mark.parametrize(
    'algorithm, window_location',
    [('fedavg', 'state'), ('scaffold', 'state'), ('fedavg', 'program')],
)
@pytest.mark.parametrize(
    'transfer, by_id', [('auto', True), ('files', True), ('values', False)]
)
def test_client_data_transfer_picks_what_the_runner_takes(
    data_npz, tmp_path, algorithm, window_location, transfer, by_id
):
  config = tiny_data.config(
      data_npz,
      tmp_path,
      'run',
      algorithm=algorithm,
      window_size=2,
      window_location=window_location,
      client_data_transfer=transfer,
  )
  task = run_lib.create_task(config)

  runner = registry.build_runner(config, task, 6)

  # Local workers (no --workers): auto is files.
  assert runner.takes_client_ids is by_id
  bundle = tmp_path / 'run' / 'client_data' / 'train.index'
  assert bundle.exists() is by_id
  if by_id:
    assert os.stat(bundle.parent).st_mode & 0o777 == 0o700


@pytest.mark.parametrize('transfer', ['auto', 'files'])
def test_database_client_data_is_read_by_id_without_a_bundle(
    data_npz, tmp_path, transfer
):
  config = tiny_data.config(
      data_npz, tmp_path, 'run', client_data_transfer=transfer
  )
  task = run_lib.create_task(config)
  database = str(tmp_path / 'clients.sqlite')
  tff.simulation.datasets.save_to_sql_client_data(
      task.train_data.client_ids,
      task.train_data.serializable_dataset_fn,
      database,
  )
  # As TFF's EMNIST and StackOverflow loaders give it (a parsing
  # preprocess over SqlClientData), declared as tff_baselines does.
  task = attrs.evolve(
      task,
      train_data=data.datasets_from_ids(
          tff.simulation.datasets.load_and_parse_sql_client_data(
              database, task.train_data.element_type_structure
          )
      ),
  )

  runner = registry.build_runner(config, task, 6)

  # Its datasets are queries the workers run by id; nothing is copied.
  assert runner.takes_client_ids
  assert not (tmp_path / 'run' / 'client_data').exists()


def test_build_runner_wraps_the_runner_in_swa_with_swa_start_round(
    monkeypatch,
):
  class Runner(round_runner.ForwardingRunner):

    def __init__(self):  # pylint: disable=super-init-not-called
      pass

  built = []
  monkeypatch.setattr(
      registry,
      'RUNNER_BUILDERS',
      {'fedavg': lambda *args: built.append(Runner()) or built[-1]},
  )
  config = experiments.ExperimentConfig(swa_start_round=4, swa_cycle=3)

  runner = registry.build_runner(config, 'task', 7)

  assert isinstance(runner, swa_runner.SwaRunner)
  assert (runner.runner, runner.start_round, runner.cycle) == (built[0], 4, 3)
  assert not isinstance(
      registry.build_runner(experiments.ExperimentConfig(), 'task', 7),
      swa_runner.SwaRunner,
  )


def test_swa_cyclic_schedule_reads_the_swa_flags():
  # lr 0.3, low 0.1, t_s = 2, c = 2: 0.3 at t = 1; then (their i = t - 1)
  # a = (i mod 2 + 1) / 2: t = 2 (i = 1) -> 1, 0.1; t = 3 (i = 2) -> 1/2,
  # 0.5 * 0.3 + 0.5 * 0.1 = 0.2.
  config = experiments.ExperimentConfig(
      client_learning_rate=0.3,
      client_lr_schedule='swa_cyclic',
      client_lr_low=0.1,
      swa_start_round=2,
      swa_cycle=2,
  )
  fn = algorithm_parts.client_learning_rate_fn(config)
  assert [round(float(fn(tf.constant(t))), 6) for t in (1, 2, 3)] == [
      0.3,
      0.1,
      0.2,
  ]
