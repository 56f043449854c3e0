"""Tests for WindowedModelAveragingFactory inside TFF's learning builders.

Expected values come from tests/linear_task.py's numpy simulation (WiMA Eq. 4/6,
IMA Algorithm 1) or from the global models observed in the states, never from
the code under test.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear_task as task
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.aggregators import WindowedModelAveragingFactory


def _run(process, rounds, with_window=True):
  state = process.initialize()
  data = task.client_datasets()
  observed = [task.kernel(state.global_model_weights)]
  window_models = [observed[0]]
  for _ in range(rounds):
    state = process.next(state, data).state
    observed.append(task.kernel(state.global_model_weights))
    if with_window:
      window_models.append(task.kernel(window_model_weights(state)))
  return observed, window_models


def _other_builders():
  client_opt = tff.learning.optimizers.build_sgdm(task.CLIENT_LR)
  return {
      'unweighted_fed_avg': lambda agg: (
          tff.learning.algorithms.build_unweighted_fed_avg(
              task.model_fn, client_opt, model_aggregator=agg
          )
      ),
      'weighted_fed_prox': lambda agg: (
          tff.learning.algorithms.build_weighted_fed_prox(
              task.model_fn,
              proximal_strength=0.5,
              client_optimizer_fn=client_opt,
              model_aggregator=agg,
          )
      ),
      'weighted_mime_lite': lambda agg: (
          tff.learning.algorithms.build_weighted_mime_lite(
              task.model_fn,
              base_optimizer=tff.learning.optimizers.build_sgdm(
                  task.CLIENT_LR, momentum=0.5
              ),
              model_aggregator=agg,
          )
      ),
      'fed_avg_with_optimizer_schedule': lambda agg: (
          tff.learning.algorithms.build_weighted_fed_avg_with_optimizer_schedule(
              task.model_fn,
              client_learning_rate_fn=lambda r: task.CLIENT_LR
              / (1.0 + tf.cast(r, tf.float32)),
              client_optimizer_fn=lambda lr: tff.learning.optimizers.build_sgdm(
                  lr
              ),
              model_aggregator=agg,
          )
      ),
  }


class TestWindowedModelAveragingFactoryInTffBuilders:
  """Composition with TFF's learning builders, read by window_model_weights."""

  @pytest.mark.parametrize(
      'mode,start_round',
      [('evaluate', 0), ('evaluate', 5), ('broadcast', 0), ('broadcast', 5)],
  )
  def test_in_tff_weighted_fed_avg_window_is_exact(self, mode, start_round):
    window_size, rounds = 3, 9
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
        model_aggregator=WindowedModelAveragingFactory(
            window_size, mode=mode, start_round=start_round
        ),
    )
    observed, window_models = _run(process, rounds)
    expected = task.simulate(window_size, mode, start_round, rounds)
    for t in range(1, rounds + 1):
      np.testing.assert_allclose(
          observed[t], expected['sent'][t], atol=1e-5, err_msg=f'round {t}'
      )
      np.testing.assert_allclose(
          window_models[t],
          expected['window'][t],
          atol=1e-5,
          err_msg=f'round {t}',
      )

  @pytest.mark.parametrize('builder', sorted(_other_builders()))
  def test_in_other_tff_builders_window_is_mean_of_observed_models(
      self, builder
  ):
    # Evaluate mode leaves each builder's trajectory unchanged, so the window
    # model must be the mean of the last W global models seen in the states.
    window_size, rounds = 3, 5
    process = _other_builders()[builder](
        WindowedModelAveragingFactory(window_size)
    )
    observed, window_models = _run(process, rounds)
    for t in range(1, rounds + 1):
      expected = (
          np.mean(observed[t - window_size + 1 : t + 1], axis=0)
          if t >= window_size
          else observed[t]
      )
      np.testing.assert_allclose(
          window_models[t], expected, atol=1e-5, err_msg=f'{builder} round {t}'
      )

  def test_unit_window_in_tff_builder_reproduces_plain_fed_avg(self):
    rounds = 5
    client_opt = tff.learning.optimizers.build_sgdm(task.CLIENT_LR)
    plain, _ = _run(
        tff.learning.algorithms.build_weighted_fed_avg(
            task.model_fn, client_opt
        ),
        rounds,
        with_window=False,
    )
    for factory in (
        WindowedModelAveragingFactory(1, mode='broadcast'),
        WindowedModelAveragingFactory(3, mode='broadcast', start_round=100),
    ):
      windowed, window_models = _run(
          tff.learning.algorithms.build_weighted_fed_avg(
              task.model_fn, client_opt, model_aggregator=factory
          ),
          rounds,
      )
      np.testing.assert_allclose(windowed, plain, atol=1e-6)
      np.testing.assert_allclose(window_models[1:], plain[1:], atol=1e-6)

  def test_with_server_sgd_lr_other_than_one_offset_is_scaled_as_documented(
      self,
  ):
    # Documented behaviour: with server SGD(eta) the factory averages the
    # virtual SGD(1.0) models v^t = v^{t-1} - a_t. Since w^t = w^0 + eta * v^t,
    # window_model_weights = w^t + (mean(v) - v^t)
    #                      = w^t + (mean(w) - w^t) / eta.
    eta, window_size, rounds = 0.5, 3, 5
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn,
        tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(eta),
        model_aggregator=WindowedModelAveragingFactory(window_size),
    )
    observed, window_models = _run(process, rounds)
    for t in range(window_size, rounds + 1):
      true_mean = np.mean(observed[t - window_size + 1 : t + 1], axis=0)
      np.testing.assert_allclose(
          window_models[t],
          observed[t] + (true_mean - observed[t]) / eta,
          atol=1e-5,
          err_msg=f'round {t}',
      )
