"""Tests for tff_fedwin.experiments.registry: one runner builder per algorithm.

What each builder's process computes is tested by its effect on the numbers
in tests/experiments/wiring_test.py; here, that the registry covers the flag's
choices and that `build_runner` dispatches on `config.algorithm`.
"""

import pytest
import tensorflow as tf

from tff_fedwin import experiments
from tff_fedwin.experiments import registry


def test_registry_has_a_builder_for_every_algorithm_flag_value():
  assert tuple(registry.RUNNER_BUILDERS) == experiments.ALGORITHMS


def test_registry_is_read_only():
  with pytest.raises(TypeError):
    registry.RUNNER_BUILDERS['fedsgd'] = None


@pytest.mark.parametrize('algorithm', experiments.ALGORITHMS)
def test_build_runner_calls_the_builder_of_the_algorithm(
    algorithm, monkeypatch
):
  calls = []

  def builder_of(name):
    def build(config, task, num_train_clients):
      calls.append((name, config, task, num_train_clients))
      return f'runner of {name}'

    return build

  monkeypatch.setattr(
      registry,
      'RUNNER_BUILDERS',
      {name: builder_of(name) for name in experiments.ALGORITHMS},
  )
  config = experiments.ExperimentConfig(algorithm=algorithm)

  runner = registry.build_runner(config, 'task', 7)

  assert runner == f'runner of {algorithm}'
  assert calls == [(algorithm, config, 'task', 7)]


@pytest.mark.parametrize(
    'algorithm, hparams, optimizer',
    [
        ('fedavg', dict(learning_rate=0.25), 'sgd'),
        ('fedavgm', dict(learning_rate=0.25, momentum=0.9), 'sgd'),
        ('fedprox', dict(learning_rate=0.25), 'sgd'),
        (
            'fedadam',
            dict(learning_rate=0.25, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
            'adam',
        ),
        (
            'fedyogi',
            dict(learning_rate=0.25, beta_1=0.9, beta_2=0.999, epsilon=1e-3),
            'yogi',
        ),
    ],
)
def test_server_optimizer_of_the_algorithm(algorithm, hparams, optimizer):
  config = experiments.ExperimentConfig(
      algorithm=algorithm, server_learning_rate=0.25
  )

  built = registry._server_optimizer(config)  # pylint: disable=protected-access

  state = built.initialize(tf.TensorSpec([2], tf.float32))
  actual = {k: float(v) for k, v in built.get_hparams(state).items()}
  assert actual == pytest.approx(hparams)
  assert optimizer in type(built).__name__.lower()
