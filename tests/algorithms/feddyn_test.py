"""FedDyn (Acar et al. 2021) on the per-client-state family, against numpy.

The expected numbers come from `np_feddyn`, written here from Algorithm 1 of
the paper in float64 (module docstring of `tff_fedwin.algorithms.feddyn`),
on `tests.scaffold_reference`'s linear softmax model, data and sampling.
"""

import numpy as np
import pytest

from tests import numpy_reference as ref
from tests import scaffold_reference as sref
from tff_fedwin.algorithms import feddyn

ALPHA = 0.5
ROUNDS = 4  # Clients 1 and 3 take part twice, so s_k and h both act.


def np_feddyn(rounds, *, window_size=None, mode='evaluate', client_loss='ce'):
  """x^t (the model sent in round t + 1), h, the s_k and the window model."""
  x = sref.np_initial_params()
  h = sref.np_zeros()
  s = [sref.np_zeros() for _ in range(sref.TOTAL_CLIENTS)]
  aggregated, history = [x], []
  for t in range(1, rounds + 1):
    sampled = sref.sampled_clients(t)
    local = []
    for i in sampled:
      data = sref.CLIENT_DATA[i]
      beta = sref.np_class_proportions(data[1])
      y = [p.copy() for p in x]
      for xb, yb in sref.np_batches(data):
        _, g = sref.np_loss_and_gradients(y, xb, yb)
        if client_loss == 'wsm':
          g = sref.np_wsm_gradients(y, xb, yb, beta)
        # grad of L_k(y) - <s_k, y> + alpha/2 ||y - x||^2.
        y = [
            p - sref.CLIENT_LEARNING_RATE * (gj - sj + ALPHA * (p - xj))
            for p, gj, sj, xj in zip(y, g, s[i], x)
        ]
      s[i] = [sj - ALPHA * (yj - xj) for sj, yj, xj in zip(s[i], y, x)]
      local.append(y)
    h = [
        hj - ALPHA / sref.TOTAL_CLIENTS * sum(y[j] - x[j] for y in local)
        for j, hj in enumerate(h)
    ]
    w_t = [
        np.mean([y[j] for y in local], axis=0) - h[j] / ALPHA
        for j in range(len(x))
    ]
    aggregated.append(w_t)
    active = window_size is not None and t >= window_size
    window = w_t
    if active:
      window = [
          ref.window_mean_eq4([m[j] for m in aggregated], t, window_size)
          for j in range(len(w_t))
      ]
    x = window if (active and mode == 'broadcast') else w_t
    history.append((x, h, [list(sk) for sk in s], window))
  return history


def _build(**kwargs):
  return feddyn.build_feddyn(
      sref.model_fn,
      alpha=ALPHA,
      client_learning_rate=sref.CLIENT_LEARNING_RATE,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )


CASES = {
    'plain': {},
    'wsm': dict(client_loss='wsm', num_classes=sref.NUM_CLASSES),
    'wima': dict(window_size=2, window_mode='evaluate'),
    'ima_files': dict(
        window_size=2, window_mode='broadcast', client_state_transfer='files'
    ),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_feddyn(name, tmp_path):
  kwargs = CASES[name]
  expected = np_feddyn(
      ROUNDS,
      window_size=kwargs.get('window_size'),
      mode=kwargs.get('window_mode', 'evaluate'),
      client_loss=kwargs.get('client_loss', 'ce'),
  )
  process = _build(**kwargs)
  files = kwargs.get('client_state_transfer') == 'files'
  rounds = sref.run_rounds(process, ROUNDS, str(tmp_path) if files else None)
  for t, state, store, _ in rounds:
    x, h, s, window = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, h)
    for i, cid in enumerate(sref.CLIENT_IDS):
      (client_state,) = store.get([cid])
      sref.assert_close(client_state.control_variate, s[i])
    sref.assert_close(process.get_model_weights(state).trainable, window)


def test_numpy_feddyn_is_not_fedavg():
  """The check can fail: FedDyn's terms move x^4 by more than the tolerance."""
  x = sref.np_initial_params()  # FedAvg: plain local SGD, the mean of the y.
  for t in range(1, ROUNDS + 1):
    local = []
    for i in sref.sampled_clients(t):
      y = [p.copy() for p in x]
      for xb, yb in sref.np_batches(sref.CLIENT_DATA[i]):
        _, g = sref.np_loss_and_gradients(y, xb, yb)
        y = [p - sref.CLIENT_LEARNING_RATE * gj for p, gj in zip(y, g)]
      local.append(y)
    x = [np.mean([y[j] for y in local], axis=0) for j in range(len(x))]
  feddyn_x = np_feddyn(ROUNDS)[-1][0]
  gap = max(np.max(np.abs(a - b)) for a, b in zip(x, feddyn_x))
  assert gap > 100 * sref.ATOL


@pytest.mark.parametrize('alpha', [0, -0.1, 'x'])
def test_alpha_must_be_positive(alpha):
  with pytest.raises((ValueError, TypeError), match='feddyn_alpha'):
    feddyn.FedDyn(alpha)
