"""Tests for tff_fedwin.algorithms.partial_window_runner (WiMA Table 5).

The wrapped runner is a fixed one whose global model w^t and window model m^t
are known arrays, so each expected model is written out by hand: the
classifier (the last k trainable arrays) from one, everything else from the
other. Whole runs against numpy: tests/experiments/wiring_test.py
(`*_classifier_only`, `*_features_only`).
"""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_fedwin import round_runner
from tff_fedwin.algorithms import partial_window_runner as pwr

ModelWeights = tff.learning.models.ModelWeights


def _weights(value):
  """Three trainable arrays (a body layer, then a Dense kernel and bias) and
  one non-trainable (e.g. a batch-norm mean), all filled with `value`."""
  return ModelWeights(
      trainable=[
          np.full((2, 3), value),
          np.full((3, 2), value),
          np.full(2, value),
      ],
      non_trainable=[np.full(3, value)],
  )


GLOBAL = _weights(1.0)
WINDOW = _weights(2.0)
EXTRA = _weights(3.0)
AGGREGATE = _weights(4.0)


class _FixedRunner(round_runner.RoundRunner):
  """w^t = 1, m^t = 2, an extra window 3 and IMA's aggregate 4 everywhere."""

  def initialize(self):
    return 'state'

  def initial_client_state(self):
    return None

  def run_round(self, state, datasets, client_states):
    return state + '+', None, {'round': len(datasets)}

  def global_model_weights(self, state):
    return GLOBAL

  def window_model_weights(self, state):
    return WINDOW

  def has_window(self, state):
    return True

  def extra_window_models(self, state):
    return collections.OrderedDict(window_5=EXTRA, aggregate=AGGREGATE)


def _values(weights):
  """Each array's single value, in order: trainable, then non-trainable."""
  return [float(np.unique(a).item()) for a in weights.trainable] + [
      float(np.unique(a).item()) for a in weights.non_trainable
  ]


@pytest.mark.parametrize(
    'part, window_values, extra_values',
    [
        # The classifier (kernel and bias, k = 2) from the window, the body
        # layer and the non-trainable array from w^t = 1.
        ('classifier', [1.0, 2.0, 2.0, 1.0], [1.0, 3.0, 3.0, 1.0]),
        # The converse: body and non-trainable from the window, head from w^t.
        ('features', [2.0, 1.0, 1.0, 2.0], [3.0, 1.0, 1.0, 3.0]),
    ],
)
def test_window_model_takes_only_its_part_from_the_window(
    part, window_values, extra_values
):
  runner = pwr.PartialWindowRunner(_FixedRunner(), part, classifier=2)
  assert _values(runner.window_model_weights('s')) == window_values
  extra = runner.extra_window_models('s')
  assert list(extra) == ['window_5', 'aggregate']
  assert _values(extra['window_5']) == extra_values
  assert _values(extra['aggregate']) == [4.0] * 4  # Not a window: as is.
  # Shapes kept; the rest of the runner untouched.
  assert [a.shape for a in runner.window_model_weights('s').trainable] == [
      (2, 3),
      (3, 2),
      (2,),
  ]
  assert runner.global_model_weights('s') is GLOBAL
  assert runner.run_round('s', [1, 2], None) == ('s+', None, {'round': 2})
  assert runner.has_window('s')


def test_a_classifier_of_one_array_takes_only_the_last():
  mixed = pwr.mix_model_weights(WINDOW, GLOBAL, 'classifier', 1)
  assert _values(mixed) == [1.0, 1.0, 2.0, 1.0]


@pytest.mark.parametrize(
    'names, expected',
    [
        # The MNIST CNN (tasks.image_models): the last Dense's kernel and bias.
        (
            [
                'conv2d/kernel:0',
                'conv2d/bias:0',
                'dense/kernel:0',
                'dense/bias:0',
            ],
            2,
        ),
        # An LSTM's nested scope, then the output layer.
        (
            [
                'embedding/embeddings:0',
                'lstm/lstm_cell/kernel:0',
                'lstm/lstm_cell/bias:0',
                'dense_1/kernel:0',
                'dense_1/bias:0',
            ],
            2,
        ),
        # A last layer without a bias.
        (['dense/kernel:0', 'dense/bias:0', 'dense_1/kernel:0'], 1),
    ],
)
def test_classifier_variable_count_is_the_last_layers(names, expected):
  assert pwr.classifier_variable_count(names) == expected


@pytest.mark.parametrize(
    'names, match',
    [
        (['kernel:0', 'bias:0'], 'layer scope'),
        ([], 'layer scope'),
        (['dense/kernel:0', 'dense/bias:0'], 'no feature extractor'),
    ],
)
def test_classifier_variable_count_refuses_what_it_cannot_split(names, match):
  with pytest.raises(ValueError, match=match):
    pwr.classifier_variable_count(names)


@pytest.mark.parametrize(
    'kwargs, match',
    [
        (dict(part='all', classifier=2), "'classifier' or 'features'"),
        (dict(part='head', classifier=2), "'classifier' or 'features'"),
        (dict(part='classifier', classifier=0), 'int >= 1'),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
  with pytest.raises(ValueError, match=match):
    pwr.PartialWindowRunner(_FixedRunner(), **kwargs)


def test_a_runner_that_is_not_a_round_runner_is_refused():
  with pytest.raises(
      ValueError, match='must be a tff_fedwin.training.RoundRunner'
  ):
    pwr.PartialWindowRunner(object(), 'classifier', 2)
