"""Tests for tff_fedwin.algorithms.fed_win against independent numpy FedAvg.

The numpy side (tests/numpy_reference.py) implements FedAvg, the window mean
(WiMA Eq. 4), its decayed-update form (Eq. 6/7) and IMA's broadcast from the
papers; nothing here calls the window code to produce an expected value.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear_task as task
from tests import numpy_reference as ref
from tests.linear_task import CLIENT_LR, INPUT_DIM, W0
from tests.linear_task import client_datasets, kernel as _kernel, model_fn
from tests.linear_task import numpy_batches, simulate as _simulate
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.aggregators import WindowBuffer
from tff_fedwin.aggregators.window_finalizer import WindowFinalizerState
from tff_fedwin.algorithms import fed_win

_ITERATOR = tff.learning.LoopImplementation.DATASET_ITERATOR  # The default.
WINDOW_GRID = [
    (w, start, mode, _ITERATOR)
    for w in (1, 3, 5)
    for start in (0, w + 2)
    for mode in ('evaluate', 'broadcast')
] + [(3, 0, 'evaluate', tff.learning.LoopImplementation.DATASET_REDUCE)]


def _window_finalizer_type(num_slots):
  return tff.to_type(
      WindowFinalizerState(
          optimizer=collections.OrderedDict(learning_rate=np.float32),
          window=WindowBuffer(
              slots=[(np.float32, [num_slots, INPUT_DIM, 1])],
              window_sum=[(np.float32, [INPUT_DIM, 1])],
              cursor=np.int32,
              num_models=np.int32,
              window_size=np.int32,
              read_every=np.int32,
              start_round=np.int32,
              broadcast=np.bool_,
          ),
      )
  )


_WINDOW_MEASUREMENTS = collections.OrderedDict(
    window_fill=np.int32, window_active=np.bool_, window_distance=np.float32
)


class TestBuildFedWinComputation:

  def test_window_state_metrics_and_get_model_weights_types(self):
    # W=5, E=2: ceil(5/2) = 3 slots of the [3, 1] kernel.
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=5,
        window_read_every=2,
    )
    weights_type = tff.learning.models.weights_type_from_model(model_fn)
    state_type = process.initialize.type_signature.result
    assert state_type.placement is tff.SERVER
    tff.test.assert_types_identical(
        state_type.member.finalizer, _window_finalizer_type(3)
    )
    tff.test.assert_types_identical(
        state_type.member.global_model_weights, weights_type
    )
    tff.test.assert_types_identical(
        process.get_model_weights.type_signature,
        tff.FunctionType(state_type.member, weights_type),
    )
    state_param, data_param = process.next.type_signature.parameter
    tff.test.assert_types_identical(state_param, state_type)
    tff.test.assert_types_identical(
        data_param,
        tff.FederatedType(
            tff.SequenceType(
                tff.types.tensorflow_to_type(model_fn().input_spec)
            ),
            tff.CLIENTS,
        ),
    )
    result_type = process.next.type_signature.result
    tff.test.assert_types_identical(result_type.state, state_type)
    tff.test.assert_types_identical(
        result_type.metrics.member.finalizer,
        tff.to_type(
            collections.OrderedDict(
                optimizer=collections.OrderedDict(update_non_finite=np.int32),
                window=_WINDOW_MEASUREMENTS,
            )
        ),
    )

  def test_without_window_types_are_tff_fed_avg_types(self):
    # No window: the same parts as TFF's build_weighted_fed_avg.
    ours = fed_win.build_fed_win(
        model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR)
    )
    theirs = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR)
    )
    tff.test.assert_types_identical(
        ours.initialize.type_signature, theirs.initialize.type_signature
    )
    tff.test.assert_types_identical(
        ours.next.type_signature, theirs.next.type_signature
    )
    tff.test.assert_types_identical(
        ours.get_model_weights.type_signature,
        theirs.get_model_weights.type_signature,
    )


class TestBuildFedWinExecution:

  @pytest.mark.parametrize(
      'window_size,start_round,mode,loop_implementation', WINDOW_GRID
  )
  def test_window_model_matches_numpy_eq4_and_eq6_every_round(
      self, window_size, start_round, mode, loop_implementation
  ):
    rounds = 2 * window_size + 3
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
        loop_implementation=loop_implementation,
    )
    expected = _simulate(window_size, mode, start_round, rounds)
    data = client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      # Window model, from the TFF computation and from the numpy reader.
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          _kernel(window_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      if expected['active'][t]:
        np.testing.assert_allclose(
            _kernel(process.get_model_weights(state)),
            ref.window_mean_eq6(expected['aggregated'], t, window_size),
            atol=1e-5,
            err_msg=f'round {t} (Eq. 6)',
        )
      # The model the clients receive next round: m^t in broadcast mode once
      # active, w^t otherwise.
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize(
      'window_size,mode,start_round',
      [(1, 'evaluate', 0), (1, 'broadcast', 0), (3, 'broadcast', 100)],
  )
  def test_inactive_or_unit_window_reproduces_tff_fedavg(
      self, window_size, mode, start_round
  ):
    rounds = 6
    ours = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
    )
    theirs = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR)
    )
    data = client_datasets()
    our_state, their_state = ours.initialize(), theirs.initialize()
    for t in range(1, rounds + 1):
      our_state = ours.next(our_state, data).state
      their_state = theirs.next(their_state, data).state
      np.testing.assert_allclose(
          _kernel(ours.get_model_weights(our_state)),
          _kernel(theirs.get_model_weights(their_state)),
          atol=1e-6,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_window_holds_post_momentum_models(self, mode):
    # FedAvgM: the window holds the models after the server momentum step, and
    # the momentum accumulator is neither averaged nor reset
    # (docs/design.md sec. 1).
    window_size, start_round, rounds = 3, 4, 8
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        tff.learning.optimizers.build_sgdm(learning_rate=0.7, momentum=0.9),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
    )
    expected = _simulate(
        window_size,
        mode,
        start_round,
        rounds,
        server_learning_rate=0.7,
        server_momentum=0.9,
    )
    data = client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize(
      'server_optimizer',
      [
          tff.learning.optimizers.build_adam(0.05),
          tff.learning.optimizers.build_yogi(0.05),
      ],
      ids=['adam', 'yogi'],
  )
  def test_evaluate_window_is_mean_of_observed_global_models(
      self, server_optimizer
  ):
    # Adaptive server optimizers: in evaluate mode the trajectory is the plain
    # one, so the window model must be the mean of the last W global models
    # observed in the states (WiMA Eq. 7 with any server optimizer).
    window_size, rounds = 3, 6
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        server_optimizer,
        window_size=window_size,
    )
    data = client_datasets()
    state = process.initialize()
    observed = [_kernel(state.global_model_weights)]
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      observed.append(_kernel(state.global_model_weights))
      expected = (
          np.mean(observed[t - window_size + 1 :], axis=0)
          if t >= window_size
          else observed[t]
      )
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected,
          atol=1e-6,
          err_msg=f'round {t}',
      )

  def test_window_measurements_report_fill_activity_and_distance(self):
    window_size, start_round, rounds = 3, 4, 6
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_start_round=start_round,
    )
    expected = _simulate(window_size, 'evaluate', start_round, rounds)
    data = client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      output = process.next(state, data)
      state = output.state
      measured = output.metrics['finalizer']['window']
      assert measured['window_fill'] == min(t, window_size)
      assert bool(measured['window_active']) == (
          t >= max(window_size, start_round)
      )
      distance = np.linalg.norm(
          expected['window'][t] - expected['aggregated'][t]
      )
      np.testing.assert_allclose(
          measured['window_distance'], distance, atol=1e-5
      )

  def test_read_every_keeps_ceil_w_over_e_slots_and_is_exact_at_read_rounds(
      self,
  ):
    # W=5, E=2: K = ceil(5/2) = 3 slots; the window model is m^t at even t >= 5
    # and the global model otherwise.
    window_size, read_every, rounds = 5, 2, 10
    process = fed_win.build_fed_win(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_read_every=read_every,
    )
    expected = _simulate(window_size, 'evaluate', 0, rounds)
    data = client_datasets()
    state = process.initialize()
    assert state.finalizer.window.slots[0].shape == (3, INPUT_DIM, 1)
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      want = (
          expected['window'][t]
          if t >= window_size and t % read_every == 0
          else expected['aggregated'][t]
      )
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          want,
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_wsm_client_loss_with_window_matches_numpy(self, mode):
    # FedAvg whose clients train on the WSM loss (beta from their own data),
    # with the window in both modes, against numpy (WSM Eq. 4 gradient).
    window_size, start_round, rounds = 2, 3, 6
    process = fed_win.build_fed_win(
        task.softmax_model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        window_size=window_size,
        window_mode=mode,
        window_start_round=start_round,
        client_loss='wsm',
        num_classes=task.NUM_CLASSES,
    )
    expected = ref.simulate(
        task.SOFTMAX_W0,
        task.softmax_numpy_batches(),
        rounds=rounds,
        client_learning_rate=CLIENT_LR,
        window_size=window_size,
        mode=mode,
        start_round=start_round,
        client_update=ref.linear_wsm_client_update,
    )
    data = task.softmax_client_datasets()
    state = process.initialize()
    for t in range(1, rounds + 1):
      state = process.next(state, data).state
      np.testing.assert_allclose(
          _kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )
      np.testing.assert_allclose(
          _kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )


class TestBuildFedWinArguments:

  @pytest.mark.parametrize(
      'kwargs,error,pattern',
      [
          (dict(window_size=0), ValueError, 'window_size'),
          (dict(window_size=2.5), ValueError, 'window_size'),
          (
              dict(window_size=3, window_mode='average'),
              ValueError,
              '`window_mode` must be one of evaluate, broadcast',
          ),
          (
              dict(window_size=3, window_start_round=-1),
              ValueError,
              'start_round',
          ),
          (dict(window_size=3, window_read_every=0), ValueError, 'read_every'),
          (
              dict(window_size=3, window_mode='broadcast', window_read_every=2),
              ValueError,
              'read_every',
          ),
      ],
  )
  def test_bad_window_arguments_raise_naming_the_argument(
      self, kwargs, error, pattern
  ):
    with pytest.raises(error, match=pattern):
      fed_win.build_fed_win(
          model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR), **kwargs
      )

  @pytest.mark.parametrize(
      'kwargs,pattern',
      [
          (dict(client_loss='focal'), '`client_loss` must be one of ce, wsm'),
          (dict(client_loss='wsm'), 'num_classes'),
          (dict(proximal_strength=-0.1), 'proximal_strength'),
      ],
  )
  def test_bad_client_loss_arguments_raise(self, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
      fed_win.build_fed_win(
          task.softmax_model_fn,
          tff.learning.optimizers.build_sgdm(CLIENT_LR),
          **kwargs,
      )


class TestBuildScheduledClientWorkComputation:

  def test_state_counts_rounds_and_measurements_add_the_rate(self):
    client_work = tff.learning.templates.build_model_delta_client_work(
        model_fn,
        tff.learning.optimizers.build_sgdm(CLIENT_LR),
        client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
    )
    scheduled = fed_win.build_scheduled_client_work(
        client_work, lambda t: 0.1 / tf.cast(t, tf.float32)
    )
    state_type = tff.FederatedType(
        tff.to_type(
            fed_win.ScheduledClientWorkState(
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
      fed_win.ima_client_learning_rate_fn(0.0, 3)
    with pytest.raises(ValueError, match='`start_round` must be .* >= 0'):
      fed_win.ima_client_learning_rate_fn(0.1, -1)

  def test_ima_client_learning_rate_schedule_values(self):
    # lr_t = lr0 * 0.99^t before t_s, lr0 * 0.99^t_s * 0.97^(t - t_s) after,
    # evaluated by hand for lr0 = 0.1, t_s = 3.
    fn = fed_win.ima_client_learning_rate_fn(0.1, 3)
    expected = {
        1: 0.1 * 0.99,
        2: 0.1 * 0.99**2,
        3: 0.1 * 0.99**3,
        5: 0.1 * 0.99**3 * 0.97**2,
    }
    for t, lr in expected.items():
      np.testing.assert_allclose(float(fn(tf.constant(t))), lr, rtol=1e-6)
