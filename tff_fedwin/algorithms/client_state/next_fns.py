"""The federated `next` of a client-state process, one per transport.

Each builder takes the client step `(x, v, C, D) -> (C+, sums summand)`
(`process._client_step_fn`), the types, and `server_update(sums_type) ->
(<S, sums> -> <S, M>)`, and returns the `tff.federated_computation` that
broadcasts x and the server vector v, maps the client step, sums and maps
the server step: `values` (client states as CLIENTS-placed values),
`state_files` (as files, `state_files`) and `without_client_states` (an
algorithm that keeps none: FedCM, FedACG; a `LearningProcess`'s `next`).
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms.client_state import state_files
from tff_fedwin.algorithms.client_state import types


def values(
    client_step, weights_and_c, server_state_type, data_type, server_update
) -> tff.Computation:
  """`next`: broadcast x and c, map the client step, sum, map the server step."""
  client_state_type = tff.types.to_type(
      types.ClientState(server_state_type.control_variate)
  )

  @tff.tensorflow.computation(*weights_and_c, client_state_type, data_type)
  def client_update_fn(
      initial_weights, server_control_variate, client_state, dataset
  ):
    return client_step(
        initial_weights, server_control_variate, client_state, dataset
    )

  server_update_fn = server_update(client_update_fn.type_signature.result[1])

  @tff.federated_computation(
      tff.FederatedType(server_state_type, tff.SERVER),
      tff.FederatedType(data_type, tff.CLIENTS),
      tff.FederatedType(client_state_type, tff.CLIENTS),
  )
  def next_fn(state, client_data, client_states):
    model_weights = tff.federated_broadcast(state.global_model_weights)
    control_variate = tff.federated_broadcast(state.control_variate)
    client_outputs = tff.federated_map(
        client_update_fn,
        (model_weights, control_variate, client_states, client_data),
    )
    sums = tff.federated_sum(client_outputs[1])
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return new_state, client_outputs[0], metrics

  return next_fn


def state_files_next(
    client_step, weights_and_c, server_state_type, data_type, server_update
) -> tff.Computation:
  """`next` with each client's c_i in and c_i+ out as files (`state_files`).

  `(<S@SERVER, {D*}@CLIENTS, {string}@CLIENTS> -> <S@SERVER, M@SERVER>)`:
  the strings are the clients' file prefixes; the client computation reads
  c_i, runs `client_step` and writes c_i+ before its sums are returned.
  """
  control_variate_spec = tff.types.type_to_tf_tensor_specs(
      server_state_type.control_variate
  )

  @tff.tensorflow.computation(*weights_and_c, np.str_, data_type)
  def client_update_fn(initial_weights, server_control_variate, prefix, data):
    client_state = state_files.read_client_state(prefix, control_variate_spec)
    new_client_state, sums = client_step(
        initial_weights, server_control_variate, client_state, data
    )
    writes = state_files.write_client_state(prefix, new_client_state)
    with tf.control_dependencies(writes):
      return tf.nest.map_structure(tf.identity, sums)

  server_update_fn = server_update(client_update_fn.type_signature.result)

  @tff.federated_computation(
      tff.FederatedType(server_state_type, tff.SERVER),
      tff.FederatedType(data_type, tff.CLIENTS),
      tff.FederatedType(np.str_, tff.CLIENTS),
  )
  def next_fn(state, client_data, client_state_prefixes):
    model_weights = tff.federated_broadcast(state.global_model_weights)
    control_variate = tff.federated_broadcast(state.control_variate)
    sums = tff.federated_sum(
        tff.federated_map(
            client_update_fn,
            (
                model_weights,
                control_variate,
                client_state_prefixes,
                client_data,
            ),
        )
    )
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return new_state, metrics

  return next_fn


def without_client_states(
    client_step, weights_and_c, server_state_type, data_type, server_update
) -> tff.Computation:
  """`next` of an algorithm without client states (`keeps_client_state`
  False): `(<S@SERVER, {D*}@CLIENTS> -> LearningProcessOutput<S, M>@SERVER)`,
  as `tff.learning.templates.LearningProcess` wants it."""

  @tff.tensorflow.computation(*weights_and_c, data_type)
  def client_update_fn(initial_weights, server_vector, dataset):
    return client_step(initial_weights, server_vector, None, dataset)[1]

  server_update_fn = server_update(client_update_fn.type_signature.result)

  @tff.federated_computation(
      tff.FederatedType(server_state_type, tff.SERVER),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, client_data):
    model_weights = tff.federated_broadcast(state.global_model_weights)
    server_vector = tff.federated_broadcast(state.control_variate)
    sums = tff.federated_sum(
        tff.federated_map(
            client_update_fn, (model_weights, server_vector, client_data)
        )
    )
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  return next_fn
