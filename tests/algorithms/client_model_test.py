"""Tests for tff_fedwin.algorithms.client_model: which initial values change.

The model: Dense(3) with Glorot-uniform kernel and bias initialized to ones
(trainable), BatchNormalization (trainable gamma = 1, beta = 0; non-trainable
moving mean 0 and moving variance 1) and a trainable `tf.Variable` created
from a tensor with no `shape` argument. Expected initial values are the
initializers' definitions: zeros for every trainable variable created with
a known shape and dtype, the variable's own value for the others.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_model

INPUT_DIM = 2
# The value of the variable created without a shape (kept as it is).
OWN_VALUE = np.array([1.5, -2.0], np.float32)


class _Shapeless(tf.keras.layers.Layer):
  """Identity holding a trainable tf.Variable created from a tensor."""

  def build(self, input_shape):
    self.own = tf.Variable(tf.constant(OWN_VALUE), trainable=True, name='own')

  def call(self, inputs):
    return inputs


def _model_fn():
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.InputLayer(input_shape=(INPUT_DIM,)),
          _Shapeless(),
          tf.keras.layers.Dense(3, bias_initializer='ones'),
          tf.keras.layers.BatchNormalization(),
      ]
  )
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
          y=tf.TensorSpec([None], tf.int32),
      ),
  )


def _initial_values(build):
  """{variable name: initial value} and the graph's op types, after `build`."""
  with tf.Graph().as_default() as graph:
    model = build()
    variables = model.trainable_variables + model.non_trainable_variables
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.initializers.variables(variables))
      values = session.run({v.name.split(':')[0]: v for v in variables})
    return values, {op.type for op in graph.get_operations()}


def _expected_client_values():
  return {
      'dense/kernel': np.zeros([INPUT_DIM, 3], np.float32),
      'dense/bias': np.zeros([3], np.float32),
      'batch_normalization/gamma': np.zeros([3], np.float32),
      'batch_normalization/beta': np.zeros([3], np.float32),
      'batch_normalization/moving_mean': np.zeros([3], np.float32),
      'batch_normalization/moving_variance': np.ones([3], np.float32),
  }


def test_trainable_variables_with_known_shape_start_at_zero():
  values, _ = _initial_values(
      lambda: client_model.build_client_model(_model_fn)
  )
  expected = _expected_client_values()
  for name, value in expected.items():
    matches = [v for n, v in values.items() if n.endswith(name)]
    assert len(matches) == 1, (name, sorted(values))
    np.testing.assert_array_equal(matches[0], value, err_msg=name)
  (own,) = [v for n, v in values.items() if n.endswith('own')]
  np.testing.assert_array_equal(own, OWN_VALUE)


@pytest.mark.parametrize(
    'build, random_ops',
    [
        (lambda: client_model.build_client_model(_model_fn), False),
        (_model_fn, True),  # The check can fail: model_fn() draws Glorot.
    ],
    ids=['client_model', 'plain_model_fn'],
)
def test_no_random_initializer_in_the_graph(build, random_ops):
  _, op_types = _initial_values(build)
  random = sorted(t for t in op_types if 'Random' in t)
  assert bool(random) == random_ops, random


def test_plain_model_fn_kernel_is_not_zero():
  # Guards the test above: the Glorot kernel differs from the zeros expected.
  values, _ = _initial_values(_model_fn)
  (kernel,) = [v for n, v in values.items() if n.endswith('dense/kernel')]
  assert np.any(kernel != 0.0)
