"""AdaBest (Varno et al. 2022) on the client-state family, against numpy.

`np_adabest` is Algorithm 1 of the paper in float64 (module docstring of
`tff_fedwin.algorithms.adabest`), on `tests.scaffold_reference`'s linear
softmax model, data and sampling: over its 5 rounds client 0 trains in
rounds 1, 4 and 5 and client 1 in rounds 1 and 3, so the decay of a stale
h_i by 1/(t - t_i') acts with gaps of 3, 2 and 1.
"""

import numpy as np
import pytest

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import adabest
from tff_fedwin.algorithms import client_state

MU, BETA = 0.5, 0.7
ROUNDS = 5
LR = sref.CLIENT_LEARNING_RATE


def np_adabest(rounds, *, server_lr=1.0, window_size=None, mode='evaluate'):
  """[(x sent next, theta-bar, h_i of every client, t_i', window model)]."""
  x = sref.np_initial_params()
  mean_prev = [p.copy() for p in x]  # theta-bar^0 = theta^0.
  h = [sref.np_zeros() for _ in range(sref.TOTAL_CLIENTS)]
  last = [0] * sref.TOTAL_CLIENTS
  aggregated, history = [x], []
  for t in range(1, rounds + 1):
    local = []
    for i in sref.sampled_clients(t):
      y = [p.copy() for p in x]
      for xb, yb in sref.np_batches(sref.CLIENT_DATA[i]):
        _, g = sref.np_loss_and_gradients(y, xb, yb)
        # grad of L_i(y) - <h_i, y>.
        y = [p - LR * (gj - hj) for p, gj, hj in zip(y, g, h[i])]
      h[i] = [
          hj / (t - last[i]) + MU * (xj - yj) for hj, xj, yj in zip(h[i], x, y)
      ]
      last[i] = t
      local.append(y)
    mean = [np.mean([y[j] for y in local], axis=0) for j in range(len(x))]
    h_server = [BETA * (old - new) for old, new in zip(mean_prev, mean)]
    w_t = [
        xj + server_lr * (m - hs - xj) for xj, m, hs in zip(x, mean, h_server)
    ]
    mean_prev = mean
    aggregated.append(w_t)
    x, window = sref.np_windowed(aggregated, t, window_size, mode)
    history.append((x, mean, [list(hi) for hi in h], list(last), window))
  return history


CASES = {
    'plain': dict(server_learning_rate=0.5),
    'ima_files': dict(
        window_size=2, window_mode='broadcast', client_state_transfer='files'
    ),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_adabest(name, tmp_path):
  kwargs = CASES[name]
  algorithm = adabest.AdaBest(MU, BETA)
  process = adabest.build_adabest(
      sref.model_fn,
      mu=MU,
      beta=BETA,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )
  expected = np_adabest(
      ROUNDS,
      server_lr=kwargs.get('server_learning_rate', 1.0),
      window_size=kwargs.get('window_size'),
      mode=kwargs.get('window_mode', 'evaluate'),
  )
  files = kwargs.get('client_state_transfer') == 'files'
  rounds = sref.run_rounds(
      process,
      ROUNDS,
      str(tmp_path) if files else None,
      initial_state=client_state.initial_client_state(sref.model_fn, algorithm),
  )
  for t, state, store, _ in rounds:
    x, mean, h, last, window = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, mean)
    for i, cid in enumerate(sref.CLIENT_IDS):
      (client,) = store.get([cid])
      sref.assert_close(client.control_variate, h[i])
      assert client.last_round == last[i]
    sref.assert_close(process.get_model_weights(state).trainable, window)


@pytest.mark.parametrize(
    'mu,beta,flag',
    [
        (0.0, 0.5, 'adabest_mu'),
        (0.1, 1.0, 'adabest_beta'),
        (0.1, -0.1, 'adabest_beta'),
    ],
)
def test_hyperparameters_are_checked(mu, beta, flag):
  with pytest.raises(ValueError, match=flag):
    adabest.AdaBest(mu, beta)
