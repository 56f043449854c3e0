"""Tests for tff_fedwin.algorithms.fednova: FedNova in `build_fed_win`.

Against numpy written from FedNova (Wang et al. 2020) as the IMA authors'
code runs it: each client's update divided by a_i (tau_i for SGD; (tau - rho
(1 - rho^tau) / (1 - rho)) / (1 - rho) with momentum rho), the server
stepping with tau_eff * sum_i p_i d_i. The task (tests/softmax_task.py) has
clients of 4, 6, 8, 10 and 12 examples in batches of 3, so they run 2, 2, 3,
4 and 4 steps: FedNova then differs from FedAvg, which the test checks too.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import fednova

CLIENT_LR = 0.5
SERVER_LR = 0.8
ROUNDS = 2


def _np_gradient(w, x, y):
  """(dL/dW, dL/db) of the batch mean softmax cross-entropy, float64."""
  kernel, bias = w
  z = x @ kernel + bias
  p = np.exp(z - z.max(axis=1, keepdims=True))
  p /= p.sum(axis=1, keepdims=True)
  g = (p - np.eye(task.NUM_CLASSES)[y]) / len(y)
  return [x.T @ g, g.sum(axis=0)]


def _np_client(w, indices, momentum):
  """(w - w_i, tau_i): SGD(M) over the client's batches of 3, in order."""
  trained = [a.copy() for a in w]
  velocity = [np.zeros_like(a) for a in w]
  steps = 0
  for start in range(0, len(indices), task.BATCH_SIZE):
    batch = indices[start : start + task.BATCH_SIZE]
    grads = _np_gradient(
        trained, task.TRAIN_X[batch].astype(np.float64), task.TRAIN_Y[batch]
    )
    velocity = [momentum * v + g for v, g in zip(velocity, grads)]
    trained = [t - CLIENT_LR * v for t, v in zip(trained, velocity)]
    steps += 1
  return [a - t for a, t in zip(w, trained)], steps


def _np_rounds(momentum, normalized=True):
  """The global models w^1..w^ROUNDS of FedNova (or FedAvg), all clients."""
  w = [task.INITIAL_KERNEL.astype(np.float64), np.zeros(task.NUM_CLASSES)]
  sizes = np.array(task.CLIENT_SIZES, np.float64)
  p = sizes / sizes.sum()
  models = []
  for _ in range(ROUNDS):
    results = [_np_client(w, idx, momentum) for idx in task.PARTITION]
    if normalized:
      a = [
          (tau - momentum * (1 - momentum**tau) / (1 - momentum))
          / (1 - momentum)
          for _, tau in results
      ]
      tau_eff = float(np.dot(p, a))
      delta = [
          tau_eff * sum(pi * d[k] / ai for pi, (d, _), ai in zip(p, results, a))
          for k in range(2)
      ]
    else:
      delta = [
          sum(pi * d[k] for pi, (d, _) in zip(p, results)) for k in range(2)
      ]
    w = [wk - SERVER_LR * dk for wk, dk in zip(w, delta)]
    models.append(w)
  return models


def _run(momentum, window_size=None):
  process = fed_win.build_fed_win(
      task.model_fn,
      tff.learning.optimizers.build_sgdm(CLIENT_LR, momentum=momentum or None),
      tff.learning.optimizers.build_sgdm(SERVER_LR),
      window_size=window_size,
      fednova=fednova.build_fednova(momentum),
  )
  state = process.initialize()
  data = task.datasets(task.CLIENT_IDS)
  models, windows = [], []
  for _ in range(ROUNDS):
    state = process.next(state, data).state
    models.append(task.leaves(process.get_model_weights(state).trainable))
    if window_size:
      windows.append(task.leaves(window_model_weights(state).trainable))
  return models, windows


@pytest.mark.parametrize('momentum', [0.0, 0.9])
def test_global_models_match_numpy_fednova(momentum):
  models, _ = _run(momentum)
  expected = _np_rounds(momentum)
  for got, want in zip(models, expected):
    for g, w in zip(got, want):
      np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
  # Unequal step counts: FedAvg's mean update is another model.
  fedavg = _np_rounds(momentum, normalized=False)
  assert np.abs(fedavg[-1][0] - expected[-1][0]).max() > 1e-3


def test_the_window_averages_fednova_models():
  models, windows = _run(0.0, window_size=2)
  expected = _np_rounds(0.0)
  # Round 1: W = 2 not yet full, the window model is w^1; round 2: the mean
  # of w^1 and w^2 (WiMA Eq. 4). The process's global model stays w^t.
  for k in range(2):
    np.testing.assert_allclose(
        windows[0][k], expected[0][k], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        windows[1][k],
        (expected[0][k] + expected[1][k]) / 2,
        rtol=1e-5,
        atol=1e-6,
    )


def test_effective_steps_by_hand():
  # rho = 0.5, tau = 3: (3 - 0.5 (1 - 0.125) / 0.5) / 0.5 = (3 - 0.875) / 0.5
  # = 4.25: the first gradient weighs 1 + 0.5 + 0.25, the second 1 + 0.5,
  # the third 1.
  got = fednova.effective_steps(tf.constant(3, tf.int64), 0.5)
  np.testing.assert_allclose(got.numpy(), 4.25, rtol=1e-6)
  assert fednova.effective_steps(tf.constant(5, tf.int64), 0.0).numpy() == 5.0


def test_a_client_without_steps_sends_zeros():
  out = fednova.normalized_update(
      [tf.constant([1.0, 2.0])], tf.constant(0, tf.int64), fednova.FedNova()
  )
  np.testing.assert_array_equal(out['normalized'][0].numpy(), [0.0, 0.0])
  assert out['steps'].numpy() == 0.0


@pytest.mark.parametrize('momentum', [-0.1, 1.0])
def test_bad_momentum_is_refused(momentum):
  with pytest.raises(ValueError, match='client_momentum'):
    fednova.build_fednova(momentum)


def test_build_fed_win_refuses_what_is_not_a_fednova():
  with pytest.raises(TypeError, match='`fednova` must be a'):
    fed_win.build_fed_win(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        fednova=0.9,
    )
