"""Value types and a stand-in inner factory for the window factory tests."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

VALUE_TYPE = tff.to_type([(np.float32, [2]), (np.float32, [3])])
WEIGHT_TYPE = tff.TensorType(np.float32)


class SumPlusOneFactory(tff.aggregators.WeightedAggregationFactory):
  """Weighted 'aggregation' that returns sum(values) + 1: proves delegation."""

  def create(self, value_type, weight_type):

    @tff.federated_computation()
    def init_fn():
      return tff.federated_value((), tff.SERVER)

    @tff.tensorflow.computation(value_type)
    def plus_one(value):
      return tf.nest.map_structure(lambda v: v + 1.0, value)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      del weight
      return tff.templates.MeasuredProcessOutput(
          state,
          tff.federated_map(plus_one, tff.federated_sum(value)),
          tff.federated_value((), tff.SERVER),
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)
