"""Tests for the bound row's arithmetic in tff_fedwin.benchmarks.rounds.

The bound must do a FedAvg round's work, nothing less: checked against FedAvg
with softmax regression written in numpy (the gradient of mean softmax
cross-entropy of logits x @ W + b is x^T (p - onehot) / B and mean(p - onehot)).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.benchmarks import rounds

LR = 0.3


def _datasets(num_clients=2, steps=2, batch=3, dim=4, classes=3, seed=1):
  rng = np.random.default_rng(seed)
  data = []
  for _ in range(num_clients):
    x = rng.normal(size=(steps * batch, dim)).astype(np.float32)
    y = rng.integers(0, classes, steps * batch).astype(np.int32)
    data.append(
        tf.data.Dataset.from_tensor_slices(
            collections.OrderedDict(x=x, y=y)
        ).batch(batch)
    )
  return data


def _numpy_fed_avg_round(w, b, data, lr):
  client_models = []
  for dataset in data:
    cw, cb = w.copy(), b.copy()
    for batch in dataset.as_numpy_iterator():
      x, y = batch['x'].astype(np.float64), batch['y']
      logits = x @ cw + cb
      p = np.exp(logits - logits.max(axis=1, keepdims=True))
      p /= p.sum(axis=1, keepdims=True)
      p[np.arange(len(y)), y] -= 1.0  # p - onehot
      cw -= lr * x.T @ p / len(y)
      cb -= lr * p.mean(axis=0)
    client_models.append((cw, cb))
  # Server SGD(1.0) on the mean delta of equal-sized clients = mean model.
  return (
      np.mean([m[0] for m in client_models], axis=0),
      np.mean([m[1] for m in client_models], axis=0),
  )


def test_tensor_round_is_fed_avg():
  data = _datasets()
  model = tf.keras.Sequential(
      [
          tf.keras.layers.Dense(
              3,
              input_shape=(4,),
              kernel_initializer='glorot_uniform',
              bias_initializer='zeros',
          )
      ]
  )
  round_fn, global_weights = rounds.build_tensor_fed_avg_round(model, LR)
  w = global_weights[0].numpy().astype(np.float64)
  b = global_weights[1].numpy().astype(np.float64)
  x, y = rounds.stack_client_data(data)
  for _ in range(2):
    round_fn(x, y)
    w, b = _numpy_fed_avg_round(w, b, data, LR)
  np.testing.assert_allclose(global_weights[0].numpy(), w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(global_weights[1].numpy(), b, rtol=1e-5, atol=1e-6)


def test_stack_client_data_shapes():
  x, y = rounds.stack_client_data(_datasets(num_clients=3, steps=2, batch=5))
  assert x.shape == (3, 2, 5, 4) and y.shape == (3, 2, 5)


def test_stack_client_data_refuses_partial_batches():
  data = _datasets()
  data[1] = data[1].unbatch().take(5).batch(3)  # Batches of 3 and 2.
  with pytest.raises(ValueError, match='equal-sized batches'):
    rounds.stack_client_data(data)
