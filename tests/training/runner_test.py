"""Tests for tff_fedwin.training.runner: the RoundRunner interface."""

import pytest

from tff_fedwin import round_runner
from tff_fedwin import training
from tff_fedwin.training import runner

_ABSTRACT = (
    'initialize',
    'initial_client_state',
    'run_round',
    'global_model_weights',
    'window_model_weights',
)


class _Complete(training.RoundRunner):
  """The five abstract methods; the model is the state itself."""

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


class _Settable(_Complete):

  def set_global_model_weights(self, state, weights):
    del state
    return weights


def test_check_runner_accepts_a_subclass():
  assert runner.check_runner(_Complete()) is None


def test_check_runner_refuses_a_duck_typed_runner():
  duck = type('Duck', (), {m: lambda self: None for m in _ABSTRACT})()
  with pytest.raises(
      ValueError, match=r'`runner` must be a .*RoundRunner.*Duck'
  ):
    runner.check_runner(duck)


def test_the_abstract_methods_are_the_required_ones():
  assert training.RoundRunner.__abstractmethods__ == frozenset(_ABSTRACT)


@pytest.mark.parametrize('method', _ABSTRACT)
def test_a_runner_missing_a_required_method_cannot_be_made(method):
  body = {m: getattr(_Complete, m) for m in _ABSTRACT if m != method}
  incomplete = type('Incomplete', (training.RoundRunner,), body)
  with pytest.raises(TypeError, match=method):
    incomplete()


def test_defaults_are_those_of_a_process_without_the_feature():
  complete = _Complete()
  assert complete.takes_client_ids is False
  assert complete.has_window(7) is True
  assert dict(complete.extra_window_models(7)) == {}
  assert complete.open_files('/nonexistent', None, 7) is None
  with pytest.raises(NotImplementedError, match='_Complete cannot replace'):
    complete.set_global_model_weights(7, 8)


def test_sets_global_model_weights_sees_an_override_through_forwarding():
  assert not round_runner.sets_global_model_weights(_Complete())
  assert round_runner.sets_global_model_weights(_Settable())
  assert round_runner.sets_global_model_weights(
      training.ForwardingRunner(_Settable())
  )
  assert not round_runner.sets_global_model_weights(
      training.ForwardingRunner(_Complete())
  )


def test_forwarding_runner_forwards_every_method():
  forwarding = training.ForwardingRunner(_Settable())
  state = forwarding.initialize()
  state, new_states, metrics = forwarding.run_round(state, [], None)
  assert (state, new_states, metrics) == (1, None, {})
  assert forwarding.global_model_weights(3) == 3
  assert forwarding.window_model_weights(4) == 4
  assert forwarding.set_global_model_weights(1, 9) == 9
  assert forwarding.takes_client_ids is False
  assert forwarding.initial_client_state() is None


def test_forwarding_runner_refuses_a_non_runner():
  with pytest.raises(ValueError, match='`runner` must be a .*RoundRunner'):
    training.ForwardingRunner(object())
