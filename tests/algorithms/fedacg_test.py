"""FedACG (Kim et al. 2024) on the client-state family, against numpy.

`np_fedacg` is Algorithm 1 of the paper in float64 (module docstring of
`tff_fedwin.algorithms.fedacg`), on `tests.scaffold_reference`'s linear
softmax model, data and sampling.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import fedacg

LAMBDA, BETA = 0.8, 0.5
ROUNDS = 3
LR = sref.CLIENT_LEARNING_RATE


def np_fedacg(rounds, *, server_lr=1.0, window_size=None, mode='evaluate'):
  """[(x sent next, m, window model)] after rounds 1..rounds."""
  x, m = sref.np_initial_params(), sref.np_zeros()
  aggregated, history = [x], []
  for t in range(1, rounds + 1):
    s = [xj + LAMBDA * mj for xj, mj in zip(x, m)]  # The lookahead.
    deltas = []
    for i in sref.sampled_clients(t):
      y = [p.copy() for p in s]
      for xb, yb in sref.np_batches(sref.CLIENT_DATA[i]):
        _, g = sref.np_loss_and_gradients(y, xb, yb)
        # grad of L_i(y) + beta/2 ||y - s||^2.
        y = [p - LR * (gj + BETA * (p - sj)) for p, gj, sj in zip(y, g, s)]
      deltas.append([yj - sj for yj, sj in zip(y, s)])
    m = [
        LAMBDA * mj + np.mean([d[j] for d in deltas], axis=0)
        for j, mj in enumerate(m)
    ]
    w_t = [xj + server_lr * mj for xj, mj in zip(x, m)]
    aggregated.append(w_t)
    x, window = sref.np_windowed(aggregated, t, window_size, mode)
    history.append((x, m, window))
  return history


CASES = {
    'plain': dict(server_learning_rate=0.5),
    'wima': dict(window_size=2, window_mode='evaluate'),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_fedacg(name):
  kwargs = CASES[name]
  process = fedacg.build_fedacg(
      sref.model_fn,
      lookahead=LAMBDA,
      proximal_strength=BETA,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )
  assert isinstance(process, tff.learning.templates.LearningProcess)
  expected = np_fedacg(
      ROUNDS,
      server_lr=kwargs.get('server_learning_rate', 1.0),
      window_size=kwargs.get('window_size'),
      mode=kwargs.get('window_mode', 'evaluate'),
  )
  for t, state in sref.run_learning_rounds(process, ROUNDS):
    x, m, window = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, m)
    sref.assert_close(process.get_model_weights(state).trainable, window)


def test_set_model_weights_replaces_x_only():
  process = fedacg.build_fedacg(
      sref.model_fn,
      lookahead=LAMBDA,
      proximal_strength=BETA,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
  )
  _, state = next(iter(sref.run_learning_rounds(process, 1)))
  zeros = tff.learning.models.ModelWeights(
      trainable=[
          np.zeros_like(v) for v in state.global_model_weights.trainable
      ],
      non_trainable=[],
  )
  new = process.set_model_weights(state, zeros)
  sref.assert_close(new.global_model_weights.trainable, sref.np_zeros())
  sref.assert_close(new.control_variate, state.control_variate)


@pytest.mark.parametrize(
    'lookahead,beta,flag',
    [
        (1.0, 0.1, 'fedacg_lambda'),
        (-0.1, 0.1, 'fedacg_lambda'),
        (0.5, -1.0, 'fedacg_beta'),
    ],
)
def test_hyperparameters_are_checked(lookahead, beta, flag):
  with pytest.raises(ValueError, match=flag):
    fedacg.FedACG(lookahead, beta)
