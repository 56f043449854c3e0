"""The bound rows' arithmetic (benchmarks.tensor_rounds) vs numpy.

A bound must do its algorithm's round work, nothing less: checked against
softmax regression written in numpy. The gradient of the mean softmax
cross-entropy of logits z = x @ W + b (+ log beta for WSM, the WSM paper's
Eq. 4 up to a constant) is x^T (p - onehot) / B and mean(p - onehot), p the
softmax of the (shifted) logits. SCAFFOLD is Karimireddy et al. 2020,
Algorithm 1, option II (the module docstring).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from benchmarks import tensor_rounds

LR = 0.3
CLASSES = 3
MASKED = -1e9  # log(beta) of an absent class (losses.wsm).


def _datasets(num_clients=2, steps=2, batch=3, dim=4, seed=1):
  rng = np.random.default_rng(seed)
  data = []
  for i in range(num_clients):
    x = rng.normal(size=(steps * batch, dim)).astype(np.float32)
    # Client 0 lacks class 2 (WSM masks it); the others hold all classes.
    classes = CLASSES - 1 if i == 0 else CLASSES
    y = rng.integers(0, classes, steps * batch).astype(np.int32)
    data.append(
        tf.data.Dataset.from_tensor_slices(
            collections.OrderedDict(x=x, y=y)
        ).batch(batch)
    )
  return data


def _log_beta(dataset):
  y = np.concatenate([b['y'] for b in dataset.as_numpy_iterator()])
  beta = np.bincount(y, minlength=CLASSES) / len(y)
  return np.where(beta > 0, np.log(np.where(beta > 0, beta, 1.0)), MASKED)


def _numpy_round(w, b, data, client_loss, control, server_lr):
  """One round; `control` = [c, [c_i of all N]] for SCAFFOLD (updated).

  The round's clients are the first len(data) of the N.
  """
  deltas, dcs = [], []
  for i, dataset in enumerate(data):
    cw, cb = w.copy(), b.copy()
    shift = _log_beta(dataset) if client_loss == 'wsm' else 0.0
    batches = list(dataset.as_numpy_iterator())
    for batch in batches:
      x, y = batch['x'].astype(np.float64), batch['y']
      logits = x @ cw + cb + shift
      p = np.exp(logits - logits.max(axis=1, keepdims=True))
      p /= p.sum(axis=1, keepdims=True)
      p[np.arange(len(y)), y] -= 1.0  # p - onehot
      gw, gb = x.T @ p / len(y), p.mean(axis=0)
      if control is not None:  # g + c - c_i
        (c_w, c_b), (ci_w, ci_b) = control[0], control[1][i]
        gw, gb = gw + c_w - ci_w, gb + c_b - ci_b
      cw, cb = cw - LR * gw, cb - LR * gb
    deltas.append((cw - w, cb - b))
    if control is not None:  # c_i+ = c_i - c + (x - y) / (K lr)
      (c_w, c_b), (ci_w, ci_b) = control[0], control[1][i]
      k_lr = len(batches) * LR
      new = (ci_w - c_w + (w - cw) / k_lr, ci_b - c_b + (b - cb) / k_lr)
      dcs.append((new[0] - ci_w, new[1] - ci_b))
      control[1][i] = new
  w = w + server_lr * np.mean([d[0] for d in deltas], axis=0)
  b = b + server_lr * np.mean([d[1] for d in deltas], axis=0)
  if control is not None:  # c <- c + sum(dc_i) / N
    n = len(control[1])
    control[0] = (
        control[0][0] + sum(d[0] for d in dcs) / n,
        control[0][1] + sum(d[1] for d in dcs) / n,
    )
  return w, b


@pytest.mark.parametrize(
    'client_loss, population, server_lr',
    [
        ('ce', None, 1.0),  # FedAvg
        ('wsm', None, 1.0),
        ('ce', None, 0.5),
        ('ce', 3, 1.0),  # SCAFFOLD, every client every round
        ('wsm', 3, 1.0),
        ('ce', 5, 0.5),  # SCAFFOLD, 3 of N = 5 clients, lr_g = 0.5
    ],
)
def test_tensor_round_is_the_algorithms_round(
    client_loss, population, server_lr
):
  data = _datasets(num_clients=3)
  model = tf.keras.Sequential(
      [
          tf.keras.layers.Dense(
              CLASSES,
              input_shape=(4,),
              kernel_initializer='glorot_uniform',
              bias_initializer='zeros',
          )
      ]
  )
  round_fn, global_weights = tensor_rounds.build_tensor_round(
      model,
      LR,
      client_loss=client_loss,
      num_classes=CLASSES,
      scaffold_clients=population,
      server_learning_rate=server_lr,
  )
  w = global_weights[0].numpy().astype(np.float64)
  b = global_weights[1].numpy().astype(np.float64)
  zeros = (np.zeros_like(w), np.zeros_like(b))
  control = [zeros, [zeros] * population] if population else None
  x, y = tensor_rounds.stack_client_data(data)
  for _ in range(3):  # SCAFFOLD's control variates matter from round 2 on.
    round_fn(x, y)
    w, b = _numpy_round(w, b, data, client_loss, control, server_lr)
  np.testing.assert_allclose(global_weights[0].numpy(), w, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(global_weights[1].numpy(), b, rtol=1e-5, atol=1e-5)


def test_tensor_round_on_sequences_with_an_embedding():
  # Next-token rounds as the LSTM rows' bound runs them: ids x [B, L] ->
  # logits E[x] @ W + b over V ids, the mean cross-entropy over all B * L
  # positions (the synthetic sequences hold no padding). With q = p - onehot
  # of each position: dW = sum_pos E[x]^T q / (B L), db = sum_pos q / (B L),
  # dE[v] = sum of q W^T over the positions whose id is v, / (B L): the
  # embedding's gradient is IndexedSlices, made dense as TFF's optimizers do.
  vocab, dim, length, batch, steps = 5, 3, 4, 2, 2
  rng = np.random.default_rng(3)
  data = []
  for _ in range(2):
    ids = rng.integers(1, vocab, (steps * batch, length + 1)).astype(np.int32)
    data.append(
        tf.data.Dataset.from_tensor_slices(
            collections.OrderedDict(x=ids[:, :-1], y=ids[:, 1:])
        ).batch(batch)
    )
  inputs = tf.keras.Input(shape=[length], dtype=tf.int32)
  hidden = tf.keras.layers.Embedding(vocab, dim)(inputs)
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(vocab)(hidden))
  round_fn, global_weights = tensor_rounds.build_tensor_round(model, LR)
  e, w, b = (v.numpy().astype(np.float64) for v in global_weights)
  x, y = tensor_rounds.stack_client_data(data)
  round_fn(x, y)
  deltas = []
  for dataset in data:
    ce, cw, cb = e.copy(), w.copy(), b.copy()
    for step in dataset.as_numpy_iterator():
      ids, targets = step['x'], step['y']
      h = ce[ids]  # [B, L, D]
      logits = h @ cw + cb
      p = np.exp(logits - logits.max(-1, keepdims=True))
      p /= p.sum(-1, keepdims=True)
      q = p.copy()
      np.put_along_axis(
          q,
          targets[..., None],
          np.take_along_axis(q, targets[..., None], -1) - 1,
          -1,
      )
      q /= ids.size
      gw = np.einsum('bld,blv->dv', h, q)
      gb = q.sum((0, 1))
      ge = np.zeros_like(ce)
      np.add.at(ge, ids, q @ cw.T)
      ce, cw, cb = ce - LR * ge, cw - LR * gw, cb - LR * gb
    deltas.append((ce - e, cw - w, cb - b))
  expected = [
      v + np.mean([d[i] for d in deltas], axis=0)
      for i, v in enumerate((e, w, b))
  ]
  for got, want in zip(global_weights, expected):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_bad_arguments():
  model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(1,))])
  with pytest.raises(ValueError, match='client_loss'):
    tensor_rounds.build_tensor_round(model, LR, client_loss='mse')
  with pytest.raises(ValueError, match='num_classes'):
    tensor_rounds.build_tensor_round(model, LR, client_loss='wsm')


def test_stack_client_data_shapes():
  x, y = tensor_rounds.stack_client_data(
      _datasets(num_clients=3, steps=2, batch=5)
  )
  assert x.shape == (3, 2, 5, 4) and y.shape == (3, 2, 5)


def test_stack_client_data_refuses_partial_batches():
  data = _datasets()
  data[1] = data[1].unbatch().take(5).batch(3)  # Batches of 3 and 2.
  with pytest.raises(ValueError, match='equal-sized batches'):
    tensor_rounds.stack_client_data(data)
