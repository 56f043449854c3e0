"""Tests of `tff_fedwin.algorithms.mime_lite`."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear_task as task
from tff_fedwin import aggregators
from tff_fedwin.algorithms import mime_lite


def _optimizers():
  return (
      tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
      tff.learning.optimizers.build_sgdm(1.0),
  )


class TestComputation:

  def test_without_window_is_tffs_mime_lite(self):
    base, server = _optimizers()
    ours = mime_lite.build_mime_lite_with_window(task.model_fn, base, server)
    theirs = tff.learning.algorithms.build_weighted_mime_lite(
        task.model_fn, base_optimizer=base, server_optimizer=server
    )
    tff.test.assert_types_identical(
        ours.next.type_signature, theirs.next.type_signature
    )

  def test_with_window_the_aggregator_state_holds_it(self):
    process = mime_lite.build_mime_lite_with_window(
        task.model_fn, *_optimizers(), window_size=2
    )
    assert aggregators.holds_window(process.initialize())


class TestExecution:

  def test_window_model_is_the_mean_of_the_last_two_global_models(self):
    # WiMA, W = 2, evaluate mode, server SGD(1.0): from round 2 the window
    # model is (w^1 + w^2) / 2, the plain mean of the global models that
    # TFF's own process reports; the global model itself is unchanged.
    process = mime_lite.build_mime_lite_with_window(
        task.model_fn, *_optimizers(), window_size=2
    )
    state = process.initialize()
    kernels = []
    for _ in range(2):
      state = process.next(state, task.client_datasets()).state
      kernels.append(task.kernel(state.global_model_weights))
    window = aggregators.window_or_global_model_weights(state)
    np.testing.assert_allclose(
        task.kernel(window), (kernels[0] + kernels[1]) / 2, rtol=1e-6
    )
    assert not np.allclose(kernels[0], kernels[1])

  def test_without_window_the_evaluated_model_is_global(self):
    process = mime_lite.build_mime_lite_with_window(
        task.model_fn, *_optimizers()
    )
    state = process.next(process.initialize(), task.client_datasets()).state
    np.testing.assert_array_equal(
        task.kernel(aggregators.window_or_global_model_weights(state)),
        task.kernel(state.global_model_weights),
    )


def test_bad_window_size_is_refused():
  with pytest.raises(ValueError, match='window_size'):
    mime_lite.build_mime_lite_with_window(
        task.model_fn, *_optimizers(), window_size=0
    )
