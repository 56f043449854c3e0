"""MIME (Karimireddy et al. 2021) on the client-state family, against numpy.

`np_mime` is Algorithm 1 of the paper with SGD(m) as the base optimizer, in
float64 and in the paper's own order (module docstring of
`tff_fedwin.algorithms.mime`): the round's mean full-batch gradient c at x,
then every step y <- y - lr ((1 - beta) (g(y; b) - g(x; b) + c) + beta m)
with the old m, then m <- (1 - beta) c + beta m and x <- x + lr_g mean(dy).
On `tests.scaffold_reference`'s linear softmax model, data and sampling
(unequal batches: the full gradient is example-weighted).
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import mime
from tff_fedwin.algorithms import sharpness

ROUNDS = 3
LR = sref.CLIENT_LEARNING_RATE


def np_full_gradient(params, data, gradient):
  """grad f_i(x): sum_b n_b g_b / sum_b n_b over the client's batches."""
  total = [np.zeros_like(p) for p in params]
  count = 0
  for xb, yb in sref.np_batches(data):
    g = gradient(params, xb, yb)
    total = [t + len(yb) * gj for t, gj in zip(total, g)]
    count += len(yb)
  return [t / count for t in total]


def np_mime(
    rounds,
    *,
    beta,
    server_lr=1.0,
    window_size=None,
    mode='evaluate',
    client_loss='ce',
):
  """[(x sent next, m, window model)] after rounds 1..rounds."""
  x, m = sref.np_initial_params(), sref.np_zeros()
  aggregated, history = [x], []
  for t in range(1, rounds + 1):
    clients = sref.sampled_clients(t)
    gradients = {}
    for i in clients:
      proportions = sref.np_class_proportions(sref.CLIENT_DATA[i][1])
      if client_loss == 'wsm':
        gradients[i] = lambda p, xb, yb, b=proportions: sref.np_wsm_gradients(
            p, xb, yb, b
        )
      else:
        gradients[i] = lambda p, xb, yb: sref.np_loss_and_gradients(p, xb, yb)[
            1
        ]
    full = [
        np_full_gradient(x, sref.CLIENT_DATA[i], gradients[i]) for i in clients
    ]
    c = [np.mean([f[j] for f in full], axis=0) for j in range(len(x))]
    deltas = []
    for i in clients:
      y = [p.copy() for p in x]
      for xb, yb in sref.np_batches(sref.CLIENT_DATA[i]):
        gy, gx = gradients[i](y, xb, yb), gradients[i](x, xb, yb)
        y = [
            p - LR * ((1 - beta) * (a - b + cj) + beta * mj)
            for p, a, b, cj, mj in zip(y, gy, gx, c, m)
        ]
      deltas.append([yj - xj for yj, xj in zip(y, x)])
    m = [(1 - beta) * cj + beta * mj for cj, mj in zip(c, m)]
    w_t = [
        xj + server_lr * np.mean([d[j] for d in deltas], axis=0)
        for j, xj in enumerate(x)
    ]
    aggregated.append(w_t)
    x, window = sref.np_windowed(aggregated, t, window_size, mode)
    history.append((x, m, window))
  return history


CASES = {
    'sgd': dict(beta=0.0, server_learning_rate=0.5),
    'sgdm_wsm_ima': dict(
        beta=0.9,
        client_loss='wsm',
        num_classes=sref.NUM_CLASSES,
        window_size=2,
        window_mode='broadcast',
    ),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_mime(name):
  kwargs = dict(CASES[name])
  beta = kwargs.pop('beta')
  process = mime.build_mime(
      sref.model_fn,
      beta=beta,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )
  assert isinstance(process, tff.learning.templates.LearningProcess)
  expected = np_mime(
      ROUNDS,
      beta=beta,
      server_lr=kwargs.get('server_learning_rate', 1.0),
      window_size=kwargs.get('window_size'),
      mode=kwargs.get('window_mode', 'evaluate'),
      client_loss=kwargs.get('client_loss', 'ce'),
  )
  for t, state in sref.run_learning_rounds(process, ROUNDS):
    x, m, window = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, m)
    sref.assert_close(process.get_model_weights(state).trainable, window)


def test_the_correction_is_not_plain_sgd():
  """The numpy reference itself moves off FedAvg: g(y; b) - g(x; b) + c is
  not g(y; b) once y has left x (a check that the bar can fail)."""
  x = sref.np_initial_params()
  data = sref.CLIENT_DATA[1]  # 3 batches: y leaves x after the first.
  plain = [p.copy() for p in x]
  for xb, yb in sref.np_batches(data):
    g = sref.np_loss_and_gradients(plain, xb, yb)[1]
    plain = [p - LR * gj for p, gj in zip(plain, g)]
  corrected = np_mime(1, beta=0.0)[0][0]
  assert not np.allclose(plain[0], corrected[0], atol=1e-3)


@pytest.mark.parametrize('beta', [1.0, 1.5, -0.1])
def test_beta_must_be_in_0_1(beta):
  with pytest.raises(ValueError, match='mime_beta'):
    mime.Mime(beta)


def test_no_sharpness():
  with pytest.raises(ValueError, match='mime subtracts.*client_sharpness'):
    mime.build_mime(
        sref.model_fn,
        beta=0.0,
        client_learning_rate=LR,
        total_clients=sref.TOTAL_CLIENTS,
        client_sharpness=sharpness.build_sharpness('sam', 0.05),
    )
