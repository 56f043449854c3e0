"""Tests for tff_fedwin.algorithms.fed_win.build_fed_win: its type signatures.

The expected types are built here by hand or taken from TFF's
build_weighted_fed_avg.
"""

import collections

import numpy as np
import tensorflow_federated as tff

from tests.linear_task import CLIENT_LR, INPUT_DIM
from tests.linear_task import model_fn
from tff_fedwin.aggregators import WindowBuffer
from tff_fedwin.aggregators.window_finalizer import WindowFinalizerState
from tff_fedwin.algorithms import fed_win


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
