"""Tests for tff_fedwin.experiments.task_defaults: each task's learning rates.

The expected rates are typed in from Reddi et al. 2021's published tuning
(google-research/federated, optimization/docs/hyperparameters.md, base-10
logarithms): Stack Overflow next word client -0.5, server FedAvg 0,
FedAvgM 0, FedAdam -2, FedYogi -2; Shakespeare client 0, server FedAvg 0,
FedAvgM -0.5, FedAdam -2, FedYogi -2. Classification tasks keep 0.05 and 1.0.
"""

import types

import attrs
import pytest

from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import task_defaults

_SO_CLIENT = 0.31622776601683794  # 10 ** -0.5
_TASKS = dict(
    mnist=dict(task='mnist'),
    emnist=dict(task='emnist', use_synthetic_data=True),
    leaf_femnist=dict(task='leaf', data_dir='d', leaf_kind='femnist'),
    stackoverflow=dict(task='stackoverflow', use_synthetic_data=True),
    text_word=dict(task='text', data_jsonl='t.jsonl'),
    shakespeare=dict(task='shakespeare'),
    leaf_shakespeare=dict(task='leaf', data_dir='d', leaf_kind='shakespeare'),
    text_char=dict(task='text', data_jsonl='t.jsonl', text_level='char'),
)


@pytest.mark.parametrize(
    'task, algorithm, client, server',
    [
        ('mnist', 'fedavg', 0.05, 1.0),
        ('mnist', 'fedadam', 0.05, 1.0),
        ('emnist', 'scaffold', 0.05, 1.0),
        ('leaf_femnist', 'fedyogi', 0.05, 1.0),
        ('stackoverflow', 'fedavg', _SO_CLIENT, 1.0),
        ('stackoverflow', 'fedavgm', _SO_CLIENT, 1.0),
        ('stackoverflow', 'fedadam', _SO_CLIENT, 0.01),
        ('text_word', 'fedyogi', _SO_CLIENT, 0.01),
        ('text_word', 'scaffold', _SO_CLIENT, 1.0),
        ('text_word', 'mime_lite', _SO_CLIENT, 1.0),
        ('shakespeare', 'fedavg', 1.0, 1.0),
        ('shakespeare', 'fedavgm', 1.0, _SO_CLIENT),
        ('leaf_shakespeare', 'fedadam', 1.0, 0.01),
        ('text_char', 'fedprox', 1.0, 1.0),
    ],
)
def test_unset_rates_take_the_tasks_defaults(task, algorithm, client, server):
  config = config_lib.ExperimentConfig(algorithm=algorithm, **_TASKS[task])
  config_lib.validate_config(config)
  filled = task_defaults.with_task_defaults(config)
  assert (filled.client_learning_rate, filled.server_learning_rate) == (
      client,
      server,
  )
  # Nothing else changes (the epsilon has its own test).
  unset = dict.fromkeys(
      ('client_learning_rate', 'server_learning_rate', 'server_epsilon')
  )
  assert attrs.evolve(filled, **unset) == config


@pytest.mark.parametrize(
    'task, algorithm, epsilon',
    [
        # tau: Stack Overflow -5, Shakespeare -3 (log10, the same table).
        ('text_word', 'fedadam', 1e-5),
        ('stackoverflow', 'fedyogi', 1e-5),
        ('shakespeare', 'fedadam', 1e-3),
        ('text_char', 'fedyogi', 1e-3),
        # Classification keeps TFF's optimizers' own (unset); SGD servers have
        # none.
        ('mnist', 'fedadam', None),
        ('leaf_femnist', 'fedyogi', None),
        ('text_word', 'fedavg', None),
        ('shakespeare', 'fedavgm', None),
    ],
)
def test_adaptive_servers_take_the_tasks_epsilon(task, algorithm, epsilon):
  config = config_lib.ExperimentConfig(algorithm=algorithm, **_TASKS[task])
  assert task_defaults.with_task_defaults(config).server_epsilon == epsilon
  given = attrs.evolve(
      config,
      server_epsilon=0.5 if algorithm in ('fedadam', 'fedyogi') else None,
  )
  assert task_defaults.with_task_defaults(given).server_epsilon == (
      given.server_epsilon
  )


@pytest.mark.parametrize('task', sorted(_TASKS))
def test_a_given_rate_is_never_changed(task):
  config = config_lib.ExperimentConfig(
      algorithm='fedadam', client_learning_rate=0.7, **_TASKS[task]
  )
  filled = task_defaults.with_task_defaults(config)
  assert filled.client_learning_rate == 0.7
  every = attrs.evolve(config, server_learning_rate=0.3, server_epsilon=0.2)
  assert task_defaults.with_task_defaults(every) is every


@pytest.mark.parametrize(
    'kind, client',
    [
        ('femnist', 0.05),
        ('celeba', 0.05),
        ('shakespeare', 1.0),
        ('reddit', 10**-0.5),  # Next word, as StackOverflow.
    ],
)
def test_leaf_auto_takes_the_kind_of_the_built_task(kind, client):
  config = config_lib.ExperimentConfig(task='leaf', data_dir='d')
  with pytest.raises(ValueError, match=r"with --leaf_kind=auto; got 'auto'"):
    task_defaults.with_task_defaults(config)
  task = types.SimpleNamespace(data_kind=kind)
  filled = task_defaults.with_defaults_of_task(config, task)
  assert filled.client_learning_rate == client


def test_every_algorithm_has_a_server_optimizer():
  assert sorted(task_defaults.SERVER_OPTIMIZERS) == sorted(
      config_lib.ALGORITHMS
  )
