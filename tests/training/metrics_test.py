"""Tests for tff_fedwin.training.metrics: a round's metrics row."""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_fedwin import training
from tff_fedwin.training import metrics

ModelWeights = tff.learning.models.ModelWeights


def test_flatten_scalar_metrics_keeps_numeric_scalars_with_paths():
  point = collections.namedtuple('Point', ['a', 'b'])
  values = collections.OrderedDict(
      client_work=collections.OrderedDict(
          train=collections.OrderedDict(loss=np.float32(0.5), n=np.int64(3))
      ),
      finalizer=point(a=np.bool_(True), b=np.zeros(3)),
      items=[1.5, 'text'],
      empty=(),
  )

  flat = metrics.flatten_scalar_metrics(values, 'train')

  assert flat == collections.OrderedDict(
      [
          ('train/client_work/train/loss', 0.5),
          ('train/client_work/train/n', 3),
          ('train/finalizer/a', 1),
          ('train/items/0', 1.5),
      ]
  )


def test_flatten_scalar_metrics_without_prefix():
  assert metrics.flatten_scalar_metrics({'a': {'b': 2}}) == {'a/b': 2}


@pytest.mark.parametrize(
    'returned',
    [
        {},
        [0.5],
        {'a/b': 0.5},
        {'': 0.5},
        {1: 0.5},
        {'acc': np.zeros(2)},
        {'acc': 'high'},
    ],
)
def test_check_eval_metrics_rejects(returned):
  with pytest.raises(ValueError, match='`evaluate_fn`'):
    metrics.check_eval_metrics(returned)


def test_check_eval_metrics_returns_floats():
  checked = metrics.check_eval_metrics(
      {'accuracy': np.float32(0.5), 'count': np.int64(3)}
  )
  assert checked == {'accuracy': 0.5, 'count': 3.0}
  assert all(type(v) is float for v in checked.values())


class _FixedRunner(training.RoundRunner):
  """Returns fixed window and global models (the loop's other calls: none)."""

  def __init__(self, window, global_):
    self._window = ModelWeights([np.array(window)], [])
    self._global = ModelWeights([np.array(global_)], [])

  def window_model_weights(self, state):
    del state
    return self._window

  def global_model_weights(self, state):
    del state
    return self._global

  def initialize(self):
    raise AssertionError('not called by evaluate_models')

  def initial_client_state(self):
    raise AssertionError('not called by evaluate_models')

  def run_round(self, state, datasets, client_states):
    raise AssertionError('not called by evaluate_models')


def _metrics_of(weights):
  value = float(weights.trainable[0])
  return {'accuracy': value / 10, 'loss': value}


def _evaluate_recording(calls, one_pass):
  """An evaluate_fn recording the models of each call (a list per call)."""

  def evaluate(weights):
    calls.append([float(weights.trainable[0])])
    return _metrics_of(weights)

  if not one_pass:
    return evaluate

  def evaluate_all(weights_list):
    calls.append([float(w.trainable[0]) for w in weights_list])
    return [_metrics_of(w) for w in weights_list]

  evaluate.evaluate_all = evaluate_all
  return evaluate


@pytest.mark.parametrize(
    'one_pass, expected_calls', [(False, [[2.0], [4.0]]), (True, [[2.0, 4.0]])]
)
def test_evaluate_models_evaluates_window_and_global_model(
    one_pass, expected_calls
):
  calls = []

  values = metrics.evaluate_models(
      _FixedRunner(2.0, 4.0), None, _evaluate_recording(calls, one_pass)
  )

  assert calls == expected_calls
  eval_time = values.pop('eval_time_seconds')
  assert eval_time >= 0
  assert list(values.items()) == [
      ('window/accuracy', 0.2),
      ('window/loss', 2.0),
      ('global/accuracy', 0.4),
      ('global/loss', 4.0),
  ]


@pytest.mark.parametrize('one_pass', [False, True])
def test_evaluate_models_evaluates_once_when_the_models_are_equal(one_pass):
  calls = []

  values = metrics.evaluate_models(
      _FixedRunner(3.0, 3.0), None, _evaluate_recording(calls, one_pass)
  )

  assert calls == [[3.0]]
  assert values['window/loss'] == values['global/loss'] == 3.0


@pytest.mark.parametrize(
    'returned, message',
    [
        ([{'loss': 1.0}], 'one mapping per model: got 1 for 2'),
        ([{'loss': 1.0}, [0.5]], 'must return a non-empty mapping'),
    ],
)
def test_evaluate_all_rejects_wrong_results(returned, message):
  def evaluate(weights):
    del weights
    raise AssertionError('evaluate_all is preferred')

  evaluate.evaluate_all = lambda weights_list: returned
  models = [ModelWeights([np.ones(1)], []), ModelWeights([np.zeros(1)], [])]

  with pytest.raises(ValueError, match=message):
    metrics.evaluate_all(evaluate, models)


def test_same_weights():
  a = ModelWeights([np.ones(2)], [np.zeros(1)])
  assert metrics.same_weights(a, ModelWeights([np.ones(2)], [np.zeros(1)]))
  assert not metrics.same_weights(a, ModelWeights([np.ones(2)], [np.ones(1)]))
  assert not metrics.same_weights(a, ModelWeights([np.ones(2)], []))


class _ExtraWindowsRunner(_FixedRunner):
  """Window 2.0, global 4.0 and extra windows (one equal to the global)."""

  def extra_window_models(self, state):
    del state
    return collections.OrderedDict(
        window_5=ModelWeights([np.array(5.0)], []),
        window_9=ModelWeights([np.array(4.0)], []),  # Inactive: w^t.
    )


@pytest.mark.parametrize(
    'one_pass, expected_calls',
    [(False, [[2.0], [4.0], [5.0]]), (True, [[2.0, 4.0, 5.0]])],
)
def test_evaluate_models_adds_extra_windows_each_model_once(
    one_pass, expected_calls
):
  calls = []

  values = metrics.evaluate_models(
      _ExtraWindowsRunner(2.0, 4.0), None, _evaluate_recording(calls, one_pass)
  )

  assert calls == expected_calls
  del values['eval_time_seconds']
  assert values == collections.OrderedDict(
      [
          ('window/accuracy', 0.2),
          ('window/loss', 2.0),
          ('global/accuracy', 0.4),
          ('global/loss', 4.0),
          ('window_5/accuracy', 0.5),
          ('window_5/loss', 5.0),
          ('window_9/accuracy', 0.4),
          ('window_9/loss', 4.0),
      ]
  )
