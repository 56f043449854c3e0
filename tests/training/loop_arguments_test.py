"""Tests for tff_fedwin.training.loop.run_training: argument validation."""

import os

import pytest

from tests import softmax_task as task
from tests.training import loop_fixtures
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold

NUM_CLIENTS = task.NUM_CLIENTS
_runner = loop_fixtures.make_runner
_run = loop_fixtures.run


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
        # softmax_task's preprocess_fn takes no `epochs`.
        (dict(client_epochs_fn=lambda t: 2), '`client_epochs_fn`'),
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


def test_duck_typed_runner_raises_before_any_file(processes, tmp_path):

  class OldRunner:
    """A duck-typed runner of the earlier interface (no base class)."""

    def __init__(self, inner):
      self.initialize = inner.initialize
      self.run_round = inner.run_round
      self.global_model_weights = inner.global_model_weights
      self.window_model_weights = inner.window_model_weights

  runner = OldRunner(runners.LearningProcessRunner(processes['fedavg']))

  with pytest.raises(ValueError, match='must be a .*RoundRunner.*OldRunner'):
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
