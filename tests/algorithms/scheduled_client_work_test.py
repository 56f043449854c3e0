"""Tests for tff_fedwin.algorithms.scheduled_client_work (IMA's schedule).

build_scheduled_client_work against TFF's client work and an independent numpy
FedAvg (tests/numpy_reference.py); ima_client_learning_rate_fn against values
computed by hand.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import numpy_reference as ref
from tests.linear_task import CLIENT_LR, W0
from tests.linear_task import client_datasets, kernel as _kernel, model_fn
from tests.linear_task import numpy_batches
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import scheduled_client_work


class TestBuildScheduledClientWorkComputation:

  def test_state_counts_rounds_and_measurements_add_the_rate(self):
    client_work = tff.learning.templates.build_model_delta_client_work(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
    )
    scheduled = scheduled_client_work.build_scheduled_client_work(
        client_work, lambda t: 0.1 / tf.cast(t, tf.float32)
    )
    state_type = tff.FederatedType(
        tff.to_type(
            scheduled_client_work.ScheduledClientWorkState(
                hparams=collections.OrderedDict(learning_rate=np.float32),
                round_num=np.int32,
            )
        ),
        tff.SERVER,
    )
    tff.test.assert_types_identical(
        scheduled.initialize.type_signature, tff.FunctionType(None, state_type)
    )
    next_type = scheduled.next.type_signature
    their_next = client_work.next.type_signature
    tff.test.assert_types_identical(next_type.parameter[0], state_type)
    tff.test.assert_types_identical(
        next_type.parameter[1], their_next.parameter[1]
    )
    tff.test.assert_types_identical(
        next_type.parameter[2], their_next.parameter[2]
    )
    tff.test.assert_types_identical(next_type.result.state, state_type)
    tff.test.assert_types_identical(
        next_type.result.result, their_next.result.result
    )
    # TFF's measurements plus `client_learning_rate`.
    measurements = tff.StructWithPythonType(
        list(tff.structure.iter_elements(their_next.result.measurements.member))
        + [('client_learning_rate', tff.TensorType(np.float32))],
        collections.OrderedDict,
    )
    tff.test.assert_types_identical(
        next_type.result.measurements,
        tff.FederatedType(measurements, tff.SERVER),
    )


class TestBuildScheduledClientWorkExecution:

  def test_client_learning_rate_fn_drives_client_training(self):
    # With a schedule lr_t = 0.1 / t the numpy FedAvg must use that rate in
    # round t; the rate is also reported in the metrics.
    rounds = 3
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(1.0),
        client_learning_rate_fn=lambda t: 0.1 / tf.cast(t, tf.float32),
        window_size=2,
    )
    data = client_datasets()
    state = process.initialize()
    w = W0.astype(np.float64)
    for t in range(1, rounds + 1):
      output = process.next(state, data)
      state = output.state
      w = w - ref.fedavg_aggregate(w, numpy_batches(), 0.1 / t)
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          w,
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          output.metrics['client_work']['client_learning_rate'],
          0.1 / t,
          rtol=1e-6,
      )


class TestImaClientLearningRateFn:

  def test_bad_arguments_raise_naming_the_argument(self):
    with pytest.raises(ValueError, match='`initial_learning_rate` must be'):
      scheduled_client_work.ima_client_learning_rate_fn(0.0, 3)
    with pytest.raises(ValueError, match='`start_round` must be .* >= 0'):
      scheduled_client_work.ima_client_learning_rate_fn(0.1, -1)

  def test_ima_client_learning_rate_schedule_values(self):
    # lr_t = lr0 * 0.99^t before t_s, lr0 * 0.99^t_s * 0.97^(t - t_s) after,
    # evaluated by hand for lr0 = 0.1, t_s = 3.
    fn = scheduled_client_work.ima_client_learning_rate_fn(0.1, 3)
    expected = {
        1: 0.1 * 0.99,
        2: 0.1 * 0.99**2,
        3: 0.1 * 0.99**3,
        5: 0.1 * 0.99**3 * 0.97**2,
    }
    for t, lr in expected.items():
      np.testing.assert_allclose(float(fn(tf.constant(t))), lr, rtol=1e-6)


class TestExponentialClientLearningRateFn:

  def test_bad_arguments_raise_naming_the_argument(self):
    with pytest.raises(ValueError, match='`initial_learning_rate` must be'):
      scheduled_client_work.exponential_client_learning_rate_fn(-0.1)
    with pytest.raises(ValueError, match=r'`decay` must be in \(0, 1\]'):
      scheduled_client_work.exponential_client_learning_rate_fn(0.1, 1.5)

  @pytest.mark.parametrize('decay', [0.99, 0.5, 1.0])
  def test_values_are_lr0_times_decay_to_the_round(self, decay):
    # lr_t = lr0 * decay^t for rounds t = 1, 2, ... (t = 0 gives lr0).
    fn = scheduled_client_work.exponential_client_learning_rate_fn(0.2, decay)
    for t in (0, 1, 2, 7, 100):  # 0.5^100 is still a normal float32.
      np.testing.assert_allclose(
          float(fn(tf.constant(t))), 0.2 * decay**t, rtol=1e-5
      )


def _values(fn, rounds):
  return [float(fn(tf.constant(t))) for t in rounds]


class TestImaDecaySchemes:
  """IMA Table 3's "Const LR" and "Cyclic Decay", by hand."""

  def test_constant_is_the_low_rate_from_the_start_round(self):
    # lr0 * 0.99^t before t_s = 3, then 5e-5 on every round.
    fn = scheduled_client_work.ima_constant_client_learning_rate_fn(
        0.1, 3, 5e-5
    )
    np.testing.assert_allclose(
        _values(fn, [1, 2, 3, 4, 10]),
        [0.1 * 0.99, 0.1 * 0.99**2, 5e-5, 5e-5, 5e-5],
        rtol=1e-6,
    )

  def test_cyclic_falls_linearly_from_the_rate_at_t_s_each_cycle(self):
    # lr0 = 0.1, t_s = 3, low = 0.02, c = 3: lr_max = 0.1 * 0.99^3 =
    # 0.0970299; step = (lr_max - 0.02) / 2 = 0.03851495. t = 3, 4, 5:
    # lr_max, lr_max - step = 0.05851495, 0.02; t = 6, 7, 8 again. Before
    # t_s: 0.1 * 0.99^t.
    fn = scheduled_client_work.ima_cyclic_client_learning_rate_fn(
        0.1, 3, 0.02, 3
    )
    np.testing.assert_allclose(
        _values(fn, range(1, 9)),
        [0.099, 0.09801] + [0.0970299, 0.05851495, 0.02] * 2,
        rtol=1e-6,
    )

  def test_cyclic_from_round_zero_starts_at_lr0(self):
    # t_s = 0: lr_max = lr0 = 0.1, c = 2: t = 1 is the cycle's last round
    # (0.02), t = 2 its first (0.1).
    fn = scheduled_client_work.ima_cyclic_client_learning_rate_fn(
        0.1, 0, 0.02, 2
    )
    np.testing.assert_allclose(
        _values(fn, [1, 2, 3]), [0.02, 0.1, 0.02], rtol=1e-6
    )

  @pytest.mark.parametrize(
      'args,message',
      [
          ((0.1, 3, 0.0, 4), '`low_rate` must be'),
          # 0.1 * 0.99^3 = 0.0970299 at t_s = 3.
          ((0.1, 3, 0.098, 4), 'below the rate reached .* 0.0970299'),
          ((0.1, 3, 0.02, 1), '`cycle` must be .* >= 2'),
          ((0.1, -1, 0.02, 4), '`start_round` must be .* >= 0'),
      ],
  )
  def test_cyclic_bad_arguments_name_the_argument(self, args, message):
    with pytest.raises(ValueError, match=message):
      scheduled_client_work.ima_cyclic_client_learning_rate_fn(*args)

  def test_constant_bad_low_rate_names_it(self):
    with pytest.raises(ValueError, match='`low_rate` must be'):
      scheduled_client_work.ima_constant_client_learning_rate_fn(0.1, 3, -1.0)


class TestSwaCyclic:
  """FedSWA's cyclic rate, by hand from the authors' schedule_cycling_lr."""

  def test_values_follow_the_authors_formula_from_the_start_round(self):
    # lr1 = 0.1, lr2 = 0.01, c = 3, t_s = 4 (the authors' S = 3). Before t_s:
    # 0.1. From it, their round i = t - 1, a = (i mod 3 + 1) / 3,
    # lr = (1 - a) 0.1 + a 0.01: t = 4 (i = 3): a = 1/3, 0.07; t = 5: a = 2/3,
    # 0.04; t = 6: a = 1, 0.01; t = 7: 0.07 again.
    fn = scheduled_client_work.swa_cyclic_client_learning_rate_fn(
        0.1, 4, 0.01, 3
    )
    np.testing.assert_allclose(
        _values(fn, range(1, 10)),
        [0.1, 0.1, 0.1, 0.07, 0.04, 0.01, 0.07, 0.04, 0.01],
        rtol=1e-6,
    )

  def test_the_cycle_counts_from_the_absolute_round(self):
    # t_s = 3, c = 2: i = 2 -> a = 1/2 (0.055), i = 3 -> a = 1 (0.01): the
    # phase is the round's, not t - t_s's.
    fn = scheduled_client_work.swa_cyclic_client_learning_rate_fn(
        0.1, 3, 0.01, 2
    )
    np.testing.assert_allclose(
        _values(fn, [2, 3, 4, 5]), [0.1, 0.055, 0.01, 0.055], rtol=1e-6
    )

  @pytest.mark.parametrize(
      'args,message',
      [
          ((0.1, 3, 0.0, 4), '`low_rate` must be'),
          ((0.1, 3, 0.02, 1), '`cycle` must be .* >= 2'),
          ((0.1, 0, 0.02, 4), '`start_round` must be .* >= 1'),
          ((0.0, 3, 0.02, 4), '`initial_learning_rate` must be'),
      ],
  )
  def test_bad_arguments_name_the_argument(self, args, message):
    with pytest.raises(ValueError, match=message):
      scheduled_client_work.swa_cyclic_client_learning_rate_fn(*args)
