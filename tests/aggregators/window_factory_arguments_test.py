"""Tests for WindowedModelAveragingFactory: argument and value-type checks."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests.aggregators import window_factory_fixtures
from tff_fedwin.aggregators import WindowedModelAveragingFactory

VALUE_TYPE = window_factory_fixtures.VALUE_TYPE
WEIGHT_TYPE = window_factory_fixtures.WEIGHT_TYPE
_SumPlusOneFactory = window_factory_fixtures.SumPlusOneFactory


class TestWindowedModelAveragingFactoryArguments:

  @pytest.mark.parametrize(
      'args,kwargs,error,pattern',
      [
          ((0,), {}, ValueError, 'window_size.*>= 1'),
          ((2.0,), {}, ValueError, 'window_size.*integer'),
          ((True,), {}, ValueError, 'window_size'),
          (('3',), {}, ValueError, 'window_size'),
          (
              (3,),
              dict(mode='ima'),
              ValueError,
              '`mode` must be one of evaluate, broadcast',
          ),
          ((3,), dict(start_round=-2), ValueError, 'start_round.*>= 0'),
          ((3,), dict(read_every=0), ValueError, 'read_every.*>= 1'),
          (
              (3,),
              dict(mode='broadcast', read_every=5),
              ValueError,
              'read_every.*broadcast',
          ),
          ((3,), dict(inner_factory='mean'), TypeError, 'inner_factory'),
      ],
  )
  def test_bad_arguments_raise_naming_the_argument(
      self, args, kwargs, error, pattern
  ):
    with pytest.raises(error, match=pattern):
      WindowedModelAveragingFactory(*args, **kwargs)

  def test_non_float_values_raise_type_error(self):
    with pytest.raises(TypeError, match='value_type.*floating'):
      WindowedModelAveragingFactory(3).create(
          tff.to_type([(np.int32, [2])]), WEIGHT_TYPE
      )

  def test_unweighted_create_with_weighted_only_inner_raises(self):
    with pytest.raises(TypeError, match='UnweightedAggregationFactory'):
      WindowedModelAveragingFactory(
          3, inner_factory=_SumPlusOneFactory()
      ).create(VALUE_TYPE)
