"""Tests for tff_fedwin.training.runner: the RoundRunner interface check."""

import pytest

from tff_fedwin.training import runner


class _Complete:

  def initialize(self):
    return 0

  def initial_client_state(self):
    return None

  def run_round(self, state, datasets, client_states):
    del datasets, client_states
    return state + 1, None, {}

  def global_model_weights(self, state):
    return state

  def window_model_weights(self, state):
    return state


def test_check_runner_accepts_a_complete_runner():
  assert runner.check_runner(_Complete()) is None


@pytest.mark.parametrize('method', runner.RUNNER_METHODS)
def test_check_runner_names_a_missing_method(method):
  incomplete = type('Incomplete', (_Complete,), {method: None})()
  with pytest.raises(ValueError, match=f'`runner`.*`{method}`'):
    runner.check_runner(incomplete)


def test_runner_methods_are_the_protocol_methods():
  protocol_methods = {
      name for name in vars(runner.RoundRunner) if not name.startswith('_')
  }
  assert set(runner.RUNNER_METHODS) == protocol_methods
