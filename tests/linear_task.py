"""A tiny deterministic federated task shared by the window tests.

A linear model y = x @ w (3 inputs, 1 output, no bias) with the mean squared
error loss, three clients of 5, 3 and 4 examples in batches of 2 (so partial
batches occur), all taking part every round; and the same batches as float64
numpy arrays for tests/numpy_reference.py.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import numpy_reference as ref

INPUT_DIM = 3
CLIENT_LR = 0.1
W0 = np.array([[0.3], [-0.2], [0.1]], np.float32)
_INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
    y=tf.TensorSpec([None, 1], tf.float32),
)


def model_fn():
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.Dense(
              1,
              use_bias=False,
              kernel_initializer=tf.keras.initializers.Constant(W0),
              input_shape=(INPUT_DIM,),
          )
      ]
  )
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.MeanSquaredError(),
      input_spec=_INPUT_SPEC,
  )


def _client_arrays():
  # Three clients of 5, 3 and 4 examples; batch size 2 leaves partial batches.
  rng = np.random.default_rng(1234)
  out = []
  for n in (5, 3, 4):
    x = rng.normal(size=(n, INPUT_DIM)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    out.append((x, y))
  return out


CLIENT_ARRAYS = _client_arrays()
BATCH_SIZE = 2


def client_datasets():
  return [
      tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict(x=x, y=y)
      ).batch(BATCH_SIZE)
      for x, y in CLIENT_ARRAYS
  ]


def numpy_batches():
  return [
      [
          (
              x[i : i + BATCH_SIZE].astype(np.float64),
              y[i : i + BATCH_SIZE].astype(np.float64),
          )
          for i in range(0, len(x), BATCH_SIZE)
      ]
      for x, y in CLIENT_ARRAYS
  ]


def kernel(model_weights):
  return np.asarray(model_weights.trainable[0])


def simulate(window_size, mode, start_round, rounds, **kwargs):
  """`numpy_reference.simulate` on this task."""
  return ref.simulate(
      W0,
      numpy_batches(),
      rounds=rounds,
      client_learning_rate=CLIENT_LR,
      window_size=window_size,
      mode=mode,
      start_round=start_round,
      **kwargs,
  )


# A 3-class linear softmax task for the WSM loss: labels are skewed per client
# and client 2 never sees class 2 (a zero class proportion).
NUM_CLASSES = 3
SOFTMAX_W0 = np.array(
    [[0.2, -0.1, 0.0], [0.0, 0.3, -0.2], [-0.1, 0.1, 0.1]], np.float32
)
_SOFTMAX_INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
    y=tf.TensorSpec([None], tf.int32),
)


def softmax_model_fn():
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.Dense(
              NUM_CLASSES,
              use_bias=False,
              kernel_initializer=tf.keras.initializers.Constant(SOFTMAX_W0),
              input_shape=(INPUT_DIM,),
          )
      ]
  )
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=_SOFTMAX_INPUT_SPEC,
  )


def _softmax_client_arrays():
  rng = np.random.default_rng(99)
  labels = ([0, 0, 0, 1, 2], [1, 1, 0], [0, 1, 1, 1])
  return [
      (
          rng.normal(size=(len(y), INPUT_DIM)).astype(np.float32),
          np.array(y, np.int32),
      )
      for y in labels
  ]


SOFTMAX_CLIENT_ARRAYS = _softmax_client_arrays()


def softmax_client_datasets():
  return [
      tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict(x=x, y=y)
      ).batch(BATCH_SIZE)
      for x, y in SOFTMAX_CLIENT_ARRAYS
  ]


def softmax_numpy_batches():
  return [
      [
          (x[i : i + BATCH_SIZE].astype(np.float64), y[i : i + BATCH_SIZE])
          for i in range(0, len(x), BATCH_SIZE)
      ]
      for x, y in SOFTMAX_CLIENT_ARRAYS
  ]
