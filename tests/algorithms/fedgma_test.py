"""FedGMA (Tenison et al. 2023) on the client-state family, against numpy.

`np_fedgma` is the soft AND-mask of the module docstring of
`tff_fedwin.algorithms.fedgma` in float64 on `tests.scaffold_reference`'s
linear softmax model and data, the same 4 clients in every round (plus one
without data in the `empty_client` case, which must not count in the
agreement). With 4 clients the agreement A = |mean_i sign(y_i - x)| is 0,
1/2 or 1 per coordinate, and with these 4 (data sets 0, 1, 2 and 2 again)
round 1 has all three: tau = 0.8 keeps 1/2 as a soft mask value, tau = 0.4
rounds it up to 1, so the cases tell the soft mask from a hard one and from
FedAvg's all-ones.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import fedgma

ROUNDS = 2
LR = sref.CLIENT_LEARNING_RATE
CLIENTS = tuple(sref.CLIENT_DATA[i] for i in (0, 1, 2, 2))


def np_fedgma(rounds, *, threshold, server_lr, client_loss='ce'):
  """[(x after round t, mask m of round t)] for t = 1..rounds."""
  x, history = sref.np_initial_params(), []
  for _ in range(rounds):
    deltas = []
    for data in CLIENTS:
      beta = sref.np_class_proportions(data[1])
      y = [p.copy() for p in x]
      for xb, yb in sref.np_batches(data):
        _, g = sref.np_loss_and_gradients(y, xb, yb)
        if client_loss == 'wsm':
          g = sref.np_wsm_gradients(y, xb, yb, beta)
        y = [p - LR * gj for p, gj in zip(y, g)]
      deltas.append([yj - xj for yj, xj in zip(y, x)])
    mask, x_new = [], []
    for j, xj in enumerate(x):
      agreement = np.abs(np.mean([np.sign(d[j]) for d in deltas], axis=0))
      mask.append(np.where(agreement > threshold, 1.0, agreement))
      mean = np.mean([d[j] for d in deltas], axis=0)
      x_new.append(xj + server_lr * mask[j] * mean)
    x = x_new
    history.append((x, mask))
  return history


CASES = {
    'soft_mask': dict(threshold=0.8, server_learning_rate=0.7),
    'hard_at_half': dict(threshold=0.4, server_learning_rate=1.0),
    'wsm_empty_client': dict(
        threshold=0.8,
        server_learning_rate=1.0,
        client_loss='wsm',
        num_classes=sref.NUM_CLASSES,
        with_empty_client=True,
    ),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_fedgma(name):
  kwargs = dict(CASES[name])
  threshold = kwargs.pop('threshold')
  with_empty = kwargs.pop('with_empty_client', False)
  process = fedgma.build_fedgma(
      sref.model_fn,
      threshold=threshold,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )
  assert isinstance(process, tff.learning.templates.LearningProcess)
  expected = np_fedgma(
      ROUNDS,
      threshold=threshold,
      server_lr=kwargs['server_learning_rate'],
      client_loss=kwargs.get('client_loss', 'ce'),
  )
  data = list(CLIENTS) + ([sref.EMPTY_DATA] if with_empty else [])
  state = process.initialize()
  for x, mask in expected:
    state = process.next(state, [sref.make_dataset(d) for d in data]).state
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, mask)


def test_reference_has_every_agreement_level():
  # The mask of round 1 must hold 0, 1/2 and 1 (the module docstring).
  (_, mask), _ = np_fedgma(ROUNDS, threshold=0.8, server_lr=1.0)
  values = set(np.round(np.concatenate([m.ravel() for m in mask]), 6))
  assert {0.0, 0.5, 1.0} <= values, values


@pytest.mark.parametrize('threshold', [-0.1, 1.5])
def test_threshold_must_be_in_0_1(threshold):
  with pytest.raises(ValueError, match='fedgma_threshold'):
    fedgma.FedGma(threshold)
