"""FedCM (Xu et al. 2021) on the client-state family, against numpy.

`np_fedcm` is Algorithm 1 of the paper in float64 (module docstring of
`tff_fedwin.algorithms.fedcm`), on `tests.scaffold_reference`'s linear
softmax model, data and sampling; its clients take unequal step counts, so
each normalizes its update by its own K.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import fedcm

ALPHA = 0.3
ROUNDS = 3
LR = sref.CLIENT_LEARNING_RATE


def np_fedcm(
    rounds,
    *,
    server_lr=1.0,
    window_size=None,
    mode='evaluate',
    client_loss='ce',
    lr_of_round=lambda t: LR,
):
  """[(x sent next, Delta, window model)] after rounds 1..rounds; round t's
  clients step with `lr_of_round(t)`."""
  x, delta = sref.np_initial_params(), sref.np_zeros()
  aggregated, history = [x], []
  for t in range(1, rounds + 1):
    lr = lr_of_round(t)
    deltas, sent = [], []
    for i in sref.sampled_clients(t):
      data = sref.CLIENT_DATA[i]
      beta = sref.np_class_proportions(data[1])
      y, k = [p.copy() for p in x], 0
      for xb, yb in sref.np_batches(data):
        _, g = sref.np_loss_and_gradients(y, xb, yb)
        if client_loss == 'wsm':
          g = sref.np_wsm_gradients(y, xb, yb, beta)
        y = [
            p - lr * (ALPHA * gj + (1 - ALPHA) * dj)
            for p, gj, dj in zip(y, g, delta)
        ]
        k += 1
      deltas.append([yj - xj for yj, xj in zip(y, x)])
      sent.append([(xj - yj) / (lr * k) for xj, yj in zip(x, y)])
    delta = [np.mean([v[j] for v in sent], axis=0) for j in range(len(x))]
    w_t = [
        xj + server_lr * np.mean([d[j] for d in deltas], axis=0)
        for j, xj in enumerate(x)
    ]
    aggregated.append(w_t)
    x, window = sref.np_windowed(aggregated, t, window_size, mode)
    history.append((x, delta, window))
  return history


CASES = {
    'plain': dict(server_learning_rate=0.5),
    'wsm_ima': dict(
        client_loss='wsm',
        num_classes=sref.NUM_CLASSES,
        window_size=2,
        window_mode='broadcast',
    ),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_fedcm(name):
  kwargs = CASES[name]
  process = fedcm.build_fedcm(
      sref.model_fn,
      alpha=ALPHA,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )
  assert isinstance(process, tff.learning.templates.LearningProcess)
  expected = np_fedcm(
      ROUNDS,
      server_lr=kwargs.get('server_learning_rate', 1.0),
      window_size=kwargs.get('window_size'),
      mode=kwargs.get('window_mode', 'evaluate'),
      client_loss=kwargs.get('client_loss', 'ce'),
  )
  for t, state in sref.run_learning_rounds(process, ROUNDS):
    x, delta, window = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, delta)
    sref.assert_close(process.get_model_weights(state).trainable, window)


@pytest.mark.parametrize('alpha', [0, 1.5, -0.1])
def test_alpha_must_be_in_0_1(alpha):
  with pytest.raises(ValueError, match='fedcm_alpha'):
    fedcm.FedCM(alpha)


def test_no_state_files():
  with pytest.raises(ValueError, match="keeps no client states.*'values'"):
    fedcm.build_fedcm(
        sref.model_fn,
        alpha=ALPHA,
        client_learning_rate=LR,
        total_clients=sref.TOTAL_CLIENTS,
        client_state_transfer='files',
    )
