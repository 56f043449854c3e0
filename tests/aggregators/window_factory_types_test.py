"""Tests for WindowedModelAveragingFactory: its type signatures.

The expected types are built here by hand around TFF's own mean factories.
"""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tests.aggregators import window_factory_fixtures
from tff_fedwin.aggregators import WindowAggregatorState
from tff_fedwin.aggregators import WindowBuffer
from tff_fedwin.aggregators import WindowedModelAveragingFactory

VALUE_TYPE = window_factory_fixtures.VALUE_TYPE
WEIGHT_TYPE = window_factory_fixtures.WEIGHT_TYPE


def _state_type(inner_process, num_slots):
  return tff.FederatedType(
      tff.to_type(
          WindowAggregatorState(
              inner=inner_process.initialize.type_signature.result.member,
              window=WindowBuffer(
                  slots=[
                      (np.float32, [num_slots, 2]),
                      (np.float32, [num_slots, 3]),
                  ],
                  window_sum=[(np.float32, [2]), (np.float32, [3])],
                  cursor=np.int32,
                  num_models=np.int32,
                  window_size=np.int32,
                  read_every=np.int32,
                  start_round=np.int32,
                  broadcast=np.bool_,
              ),
              position=[(np.float32, [2]), (np.float32, [3])],
          )
      ),
      tff.SERVER,
  )


class TestWindowedModelAveragingFactoryComputation:

  @pytest.mark.parametrize('weighted', [True, False])
  def test_type_signature_places_state_on_server(self, weighted):
    factory = WindowedModelAveragingFactory(4)
    process = (
        factory.create(VALUE_TYPE, WEIGHT_TYPE)
        if weighted
        else factory.create(VALUE_TYPE)
    )
    assert isinstance(process, tff.templates.AggregationProcess)
    state_type = process.initialize.type_signature.result
    assert state_type.placement is tff.SERVER
    # Window slots: K = W = 4 copies of each tensor, the running sum and the
    # position: one copy each.
    assert state_type.member.window.slots[0].shape == (4, 2)
    assert state_type.member.window.window_sum[1].shape == (3,)
    result_type = process.next.type_signature.result
    assert result_type.result.placement is tff.SERVER
    assert result_type.result.member.is_equivalent_to(VALUE_TYPE)
    assert list(process.next.type_signature.parameter[1].member) == list(
        VALUE_TYPE
    )
    assert len(process.next.type_signature.parameter) == (3 if weighted else 2)

  @pytest.mark.parametrize('weighted', [True, False])
  @pytest.mark.parametrize(
      'window_size,read_every,num_slots', [(4, 1, 4), (5, 2, 3)]
  )
  def test_type_signatures_are_identical_to_hand_built(
      self, weighted, window_size, read_every, num_slots
  ):
    # The inner process is TFF's own mean; the window adds its buffer and
    # the position to the state and window measurements.
    factory = WindowedModelAveragingFactory(window_size, read_every=read_every)
    if weighted:
      process = factory.create(VALUE_TYPE, WEIGHT_TYPE)
      inner = tff.aggregators.MeanFactory().create(VALUE_TYPE, WEIGHT_TYPE)
    else:
      process = factory.create(VALUE_TYPE)
      inner = tff.aggregators.UnweightedMeanFactory().create(VALUE_TYPE)
    state_type = _state_type(inner, num_slots)
    tff.test.assert_types_identical(
        process.initialize.type_signature, tff.FunctionType(None, state_type)
    )
    parameter = [
        ('state', state_type),
        ('value', tff.FederatedType(VALUE_TYPE, tff.CLIENTS)),
    ]
    if weighted:
      parameter.append(('weight', tff.FederatedType(WEIGHT_TYPE, tff.CLIENTS)))
    measurements = collections.OrderedDict(
        inner=inner.next.type_signature.result.measurements.member,
        window=collections.OrderedDict(
            window_fill=np.int32,
            window_active=np.bool_,
            window_distance=np.float32,
        ),
    )
    expected_next = tff.FunctionType(
        parameter=tff.StructWithPythonType(parameter, collections.OrderedDict),
        result=tff.templates.MeasuredProcessOutput(
            state=state_type,
            result=tff.FederatedType(VALUE_TYPE, tff.SERVER),
            measurements=tff.FederatedType(
                tff.to_type(measurements), tff.SERVER
            ),
        ),
    )
    tff.test.assert_types_identical(process.next.type_signature, expected_next)

  def test_window_adds_no_aggregation_of_its_own(self):
    # With a secure inner sum, the composed process aggregates only through
    # it: the window step runs on the server.
    inner = tff.aggregators.UnweightedMeanFactory(
        value_sum_factory=tff.aggregators.SecureSumFactory(
            upper_bound_threshold=1.0, lower_bound_threshold=-1.0
        ),
        count_sum_factory=tff.aggregators.SecureSumFactory(
            upper_bound_threshold=1
        ),
    )
    process = WindowedModelAveragingFactory(3, inner_factory=inner).create(
        VALUE_TYPE
    )
    tff.test.assert_not_contains_unsecure_aggregation(process.next)
    tff.test.assert_contains_secure_aggregation(process.next)
