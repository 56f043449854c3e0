"""Tests for tff_fedwin.training.metrics: a round's metrics row."""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

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


class _FixedRunner:
  """Returns fixed window and global models."""

  def __init__(self, window, global_):
    self._window = ModelWeights([np.array(window)], [])
    self._global = ModelWeights([np.array(global_)], [])

  def window_model_weights(self, state):
    del state
    return self._window

  def global_model_weights(self, state):
    del state
    return self._global


def _evaluate_recording(calls):
  def evaluate(weights):
    value = float(weights.trainable[0])
    calls.append(value)
    return {'accuracy': value / 10, 'loss': value}

  return evaluate


def test_evaluate_models_evaluates_window_and_global_model():
  calls = []

  values = metrics.evaluate_models(
      _FixedRunner(2.0, 4.0), None, _evaluate_recording(calls)
  )

  assert calls == [2.0, 4.0]
  eval_time = values.pop('eval_time_seconds')
  assert eval_time >= 0
  assert list(values.items()) == [
      ('window/accuracy', 0.2),
      ('window/loss', 2.0),
      ('global/accuracy', 0.4),
      ('global/loss', 4.0),
  ]


def test_evaluate_models_evaluates_once_when_the_models_are_equal():
  calls = []

  values = metrics.evaluate_models(
      _FixedRunner(3.0, 3.0), None, _evaluate_recording(calls)
  )

  assert calls == [3.0]
  assert values['window/loss'] == values['global/loss'] == 3.0


def test_same_weights():
  a = ModelWeights([np.ones(2)], [np.zeros(1)])
  assert metrics.same_weights(a, ModelWeights([np.ones(2)], [np.zeros(1)]))
  assert not metrics.same_weights(a, ModelWeights([np.ones(2)], [np.ones(1)]))
  assert not metrics.same_weights(a, ModelWeights([np.ones(2)], []))
