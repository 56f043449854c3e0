"""The federated `next` of a client-state process, one per transport.

`build_next` returns the `tff.federated_computation` that broadcasts x and
the server's message (its vector v, with the completed rounds if the clients
need them), maps the client step, sums and maps the server step: `values`
(client states as CLIENTS-placed values), `state_files_next` (as files,
`state_files`) and `without_client_states` (an algorithm that keeps none:
FedCM, FedACG, MIME; a `LearningProcess`'s `next`, with MIME's
full-gradient step first).
"""

from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms.client_state import algorithm as algorithm_lib
from tff_fedwin.algorithms.client_state import client
from tff_fedwin.algorithms.client_state import server
from tff_fedwin.algorithms.client_state import state_files
from tff_fedwin.algorithms.client_state import types


class NextParts(NamedTuple):
  """What every `next` builder takes.

  Attributes:
    model_fn: The model's no-arg constructor.
    algorithm: The `ClientStateAlgorithm`.
    client_args: The keyword arguments of `client.build_client_update`.
    server_args: The keyword arguments of `server.next_server_state`.
    sends_round: Whether the server's message is (vector, round_num)
      (`tracks_rounds`, a feature step or a client schedule); else the vector.
    server_state_type: The type S.
    data_type: The clients' dataset type.
  """

  model_fn: Any
  algorithm: algorithm_lib.ClientStateAlgorithm
  client_args: dict[str, Any]
  server_args: dict[str, Any]
  sends_round: bool
  server_state_type: Any
  data_type: Any


def build_next(parts: NextParts, client_state_transfer: str) -> tff.Computation:
  """The process's `next`: `without_client_states` for an algorithm that
  keeps none, else `values` or `state_files_next` by the transfer."""
  if not parts.algorithm.keeps_client_state:
    return without_client_states(parts)
  if client_state_transfer == 'files':
    return state_files_next(parts)
  return values(parts)


def _client_step(
    parts: NextParts, initial_weights, message, client_state, data
):
  """`(C+, round sums summand)` of one client, traced in a computation."""
  client_update = client.build_client_update(
      parts.model_fn, parts.algorithm, **parts.client_args
  )
  if parts.sends_round:  # The message is (server vector, round_num).
    new_client_state, result = client_update(
        initial_weights, message[0], client_state, data, message[1]
    )
  else:
    new_client_state, result = client_update(
        initial_weights, message, client_state, data
    )
  return new_client_state, server.round_sums_summand(result)


def _broadcast_types(parts: NextParts):
  """The types of x and of the server's message."""
  state_type = parts.server_state_type
  message = state_type.control_variate
  if parts.sends_round:  # A Python tuple, so the vector keeps its container.
    message = tff.types.StructWithPythonType(
        [message, state_type.round_num], tuple
    )
  return state_type.global_model_weights, message


def _client_state_type(parts: NextParts):
  """C: a `ClientState` of the server vector's type, with `tracks_rounds` a
  `RoundClientState` (its round a float32 scalar)."""
  vector = parts.server_state_type.control_variate
  if parts.algorithm.tracks_rounds:
    return tff.types.to_type(
        types.RoundClientState(vector, tff.TensorType(np.float32))
    )
  return tff.types.to_type(types.ClientState(vector))


def _message(parts: NextParts, state):
  """The server's message@SERVER, in a federated body."""
  if parts.sends_round:
    return tff.federated_zip((state.control_variate, state.round_num))
  return state.control_variate


def _broadcast(parts: NextParts, state):
  """x and the server's message, each broadcast to the clients."""
  return (
      tff.federated_broadcast(state.global_model_weights),
      tff.federated_broadcast(_message(parts, state)),
  )


def _server_update_fn(parts: NextParts, sums_type) -> tff.Computation:
  """`(<S, sums> -> <S, M>)`: `server.next_server_state`."""

  @tff.tensorflow.computation(parts.server_state_type, sums_type)
  def server_update_fn(state, sums):
    return server.next_server_state(
        parts.algorithm, state, sums, **parts.server_args
    )

  return server_update_fn


def values(parts: NextParts) -> tff.Computation:
  """`next`: broadcast x and c, map the client step, sum, map the server step."""
  client_state_type = _client_state_type(parts)

  @tff.tensorflow.computation(
      *_broadcast_types(parts), client_state_type, parts.data_type
  )
  def client_update_fn(initial_weights, message, client_state, dataset):
    return _client_step(parts, initial_weights, message, client_state, dataset)

  server_update_fn = _server_update_fn(
      parts, client_update_fn.type_signature.result[1]
  )

  @tff.federated_computation(
      tff.FederatedType(parts.server_state_type, tff.SERVER),
      tff.FederatedType(parts.data_type, tff.CLIENTS),
      tff.FederatedType(client_state_type, tff.CLIENTS),
  )
  def next_fn(state, client_data, client_states):
    model_weights, message = _broadcast(parts, state)
    client_outputs = tff.federated_map(
        client_update_fn,
        (model_weights, message, client_states, client_data),
    )
    sums = tff.federated_sum(client_outputs[1])
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return new_state, client_outputs[0], metrics

  return next_fn


def state_files_next(parts: NextParts) -> tff.Computation:
  """`next` with each client's c_i in and c_i+ out as files (`state_files`).

  `(<S@SERVER, {D*}@CLIENTS, {string}@CLIENTS> -> <S@SERVER, M@SERVER>)`:
  the strings are the clients' file prefixes; the client computation reads
  c_i, runs the client step and writes c_i+ before its sums are returned.
  """
  client_state_spec = tff.types.type_to_tf_tensor_specs(
      _client_state_type(parts)
  )

  @tff.tensorflow.computation(
      *_broadcast_types(parts), np.str_, parts.data_type
  )
  def client_update_fn(initial_weights, message, prefix, data):
    client_state = state_files.read_client_state(prefix, client_state_spec)
    new_client_state, sums = _client_step(
        parts, initial_weights, message, client_state, data
    )
    writes = state_files.write_client_state(prefix, new_client_state)
    with tf.control_dependencies(writes):
      return tf.nest.map_structure(tf.identity, sums)

  server_update_fn = _server_update_fn(
      parts, client_update_fn.type_signature.result
  )

  @tff.federated_computation(
      tff.FederatedType(parts.server_state_type, tff.SERVER),
      tff.FederatedType(parts.data_type, tff.CLIENTS),
      tff.FederatedType(np.str_, tff.CLIENTS),
  )
  def next_fn(state, client_data, client_state_prefixes):
    model_weights, message = _broadcast(parts, state)
    sums = tff.federated_sum(
        tff.federated_map(
            client_update_fn,
            (model_weights, message, client_state_prefixes, client_data),
        )
    )
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return new_state, metrics

  return next_fn


def _full_gradient_step(parts: NextParts):
  """`(state, x@CLIENTS, data) -> state`, in a federated body: the clients'
  full-batch gradients at x summed, then the state with the round's server
  vector (`server.with_round_vector`)."""

  @tff.tensorflow.computation(
      parts.server_state_type.global_model_weights, parts.data_type
  )
  def full_gradient_fn(initial_weights, dataset):
    full_gradient = client.build_full_gradient(
        parts.model_fn,
        client_loss=parts.client_args['client_loss'],
        num_classes=parts.client_args['num_classes'],
    )
    return full_gradient(initial_weights, dataset)

  @tff.tensorflow.computation(
      parts.server_state_type, full_gradient_fn.type_signature.result
  )
  def round_state_fn(state, sums):
    return server.with_round_vector(parts.algorithm, state, sums)

  def step(state, model_weights, client_data):
    sums = tff.federated_sum(
        tff.federated_map(full_gradient_fn, (model_weights, client_data))
    )
    return tff.federated_map(round_state_fn, (state, sums))

  return step


def without_client_states(parts: NextParts) -> tff.Computation:
  """`next` of an algorithm without client states (`keeps_client_state`
  False): `(<S@SERVER, {D*}@CLIENTS> -> LearningProcessOutput<S, M>@SERVER)`,
  as `tff.learning.templates.LearningProcess` wants it. With
  `uses_full_gradient` (MIME) the round first sums the clients' full-batch
  gradients at x and replaces the server vector, then broadcasts it."""

  @tff.tensorflow.computation(*_broadcast_types(parts), parts.data_type)
  def client_update_fn(initial_weights, message, dataset):
    return _client_step(parts, initial_weights, message, None, dataset)[1]

  server_update_fn = _server_update_fn(
      parts, client_update_fn.type_signature.result
  )
  full_gradient_step = None
  if parts.algorithm.uses_full_gradient:
    full_gradient_step = _full_gradient_step(parts)

  @tff.federated_computation(
      tff.FederatedType(parts.server_state_type, tff.SERVER),
      tff.FederatedType(parts.data_type, tff.CLIENTS),
  )
  def next_fn(state, client_data):
    model_weights = tff.federated_broadcast(state.global_model_weights)
    if full_gradient_step is not None:
      state = full_gradient_step(state, model_weights, client_data)
    message = tff.federated_broadcast(_message(parts, state))
    sums = tff.federated_sum(
        tff.federated_map(
            client_update_fn, (model_weights, message, client_data)
        )
    )
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  return next_fn
