"""A client learning-rate schedule on the client-state family, against numpy.

SCAFFOLD with IMA (a broadcast window from t_s) and IMA's client schedule,
its states as values and as files, and FedCM (no client states) with the
same schedule: round t's clients step with lr_t and the algorithms'
vectors divide by K lr_t (SCAFFOLD option II, FedCM's Delta). The schedule
is IMA's form with steep decays (0.8 before t_s, 0.5 from it), so a step
taken with the wrong round's rate is far outside the tolerance.
"""

import numpy as np
import pytest

from tests import scaffold_reference as sref
from tests.algorithms import fedcm_test
from tff_fedwin.algorithms import fedcm
from tff_fedwin.algorithms import scaffold
from tff_fedwin.algorithms import scheduled_client_work

ROUNDS = 3
START = 2  # t_s: the window (W = 2) broadcasts and the schedule turns here.
LR0 = sref.CLIENT_LEARNING_RATE
SCHEDULE = scheduled_client_work.ima_client_learning_rate_fn(
    LR0, START, decay_before=0.8, decay_after=0.5
)


def np_lr(t):
  """IMA's schedule written out: lr0 0.8^t before t_s, then
  lr0 0.8^t_s 0.5^(t - t_s): 0.08, 0.032, 0.016 for t = 1, 2, 3."""
  if t < START:
    return LR0 * 0.8**t
  return LR0 * 0.8**START * 0.5 ** (t - START)


def test_np_lr_is_the_schedule():
  # The hand values: 0.1 * 0.8 = 0.08; 0.1 * 0.64 = 0.064, * 0.5^0 at
  # t = t_s = 2 -> 0.064; t = 3: 0.064 * 0.5 = 0.032.
  assert [np_lr(t) for t in (1, 2, 3)] == pytest.approx([0.08, 0.064, 0.032])
  got = [float(SCHEDULE(np.int32(t))) for t in (1, 2, 3)]
  np.testing.assert_allclose(got, [0.08, 0.064, 0.032], rtol=1e-6)


@pytest.mark.parametrize('transfer', ['values', 'files'])
def test_scaffold_with_ima_and_its_schedule_matches_numpy(transfer, tmp_path):
  process = scaffold.build_scaffold(
      sref.model_fn,
      client_learning_rate=LR0,
      total_clients=sref.TOTAL_CLIENTS,
      window_size=2,
      window_mode='broadcast',
      window_start_round=START,
      client_state_transfer=transfer,
      client_learning_rate_fn=SCHEDULE,
  )
  expected = sref.np_simulate(
      ROUNDS,
      window_size=2,
      mode='broadcast',
      start_round=START,
      lr_of_round=np_lr,
  )
  files = str(tmp_path) if transfer == 'files' else None
  for t, state, store, _ in sref.run_rounds(process, ROUNDS, files):
    sref.assert_round_matches(t, state, store, expected[t - 1], True)


def test_fedcm_with_a_schedule_matches_numpy():
  process = fedcm.build_fedcm(
      sref.model_fn,
      alpha=fedcm_test.ALPHA,
      client_learning_rate=LR0,
      total_clients=sref.TOTAL_CLIENTS,
      client_learning_rate_fn=SCHEDULE,
  )
  expected = fedcm_test.np_fedcm(ROUNDS, lr_of_round=np_lr)
  for t, state in sref.run_learning_rounds(process, ROUNDS):
    x, delta, _ = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    sref.assert_close(state.control_variate, delta)


def test_the_schedule_must_be_callable():
  with pytest.raises(TypeError, match='`client_learning_rate_fn` must be'):
    scaffold.build_scaffold(
        sref.model_fn,
        client_learning_rate=LR0,
        total_clients=sref.TOTAL_CLIENTS,
        client_learning_rate_fn=0.05,
    )
