"""The federated `next` of a client-state process, one per transport.

Each builder takes the `NextParts` (the client step `(x, message, C, D) ->
(C+, sums summand)` of `client_step_fn`, the types of `broadcast_types`, the
server's message of `server_message`, `server_update(sums_type) -> (<S,
sums> -> <S, M>)`) and returns the `tff.federated_computation` that
broadcasts x and the server vector v, maps the client step, sums and maps
the server step: `values` (client states as CLIENTS-placed values),
`state_files` (as files, `state_files`) and `without_client_states` (an
algorithm that keeps none: FedCM, FedACG, MIME; a `LearningProcess`'s
`next`, with MIME's full-gradient step first).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms.client_state import client
from tff_fedwin.algorithms.client_state import server
from tff_fedwin.algorithms.client_state import state_files


def client_step_fn(model_fn, algorithm, sends_round, **client_args):
  """`(x, c, C, D) -> (C+, round sums summand)`, traced in a computation;
  with `sends_round` the message is (c, round_num).

  `client_args` are those of `client.build_client_update`.
  """

  def client_step(initial_weights, message, client_state, data):
    client_update = client.build_client_update(
        model_fn, algorithm, **client_args
    )
    if sends_round:  # The message is (server vector, round_num).
      new_client_state, result = client_update(
          initial_weights, message[0], client_state, data, message[1]
      )
    else:
      new_client_state, result = client_update(
          initial_weights, message, client_state, data
      )
    return new_client_state, server.round_sums_summand(result)

  return client_step


def broadcast_types(sends_round, server_state_type):
  """The types of x and of the server's message (`server_message`)."""
  message = server_state_type.control_variate
  if sends_round:  # A Python tuple, so the vector keeps its container.
    message = tff.types.StructWithPythonType(
        [message, server_state_type.round_num], tuple
    )
  return server_state_type.global_model_weights, message


def server_message(sends_round):
  """`state@SERVER -> message@SERVER`, in a federated body: the server
  vector, and with `sends_round` (`tracks_rounds` or a client schedule)
  also the completed rounds."""
  if sends_round:
    return lambda state: tff.federated_zip(
        (state.control_variate, state.round_num)
    )
  return lambda state: state.control_variate


class NextParts(NamedTuple):
  """What every `next` builder takes.

  Attributes:
    client_step: `(x, message, C, D) -> (C+, sums summand)`.
    broadcast_types: The types of x and of the server's message to the
      clients (the server vector; with the round for `tracks_rounds`).
    server_message: In a federated body, `state@SERVER -> message@SERVER`.
    client_state_type: The type C of a client's state.
    server_state_type: The type S.
    data_type: The clients' dataset type.
    server_update: `sums_type -> (<S, sums> -> <S, M>)`.
    full_gradient: With `uses_full_gradient` (MIME), the client's `(x, D) ->
      GradientSum` traced in a computation; else None.
    round_state: With `full_gradient`, `sums_type -> (<S, sums> -> S)`: the
      state with the round's server vector; else None.
  """

  client_step: Callable[..., Any]
  broadcast_types: tuple[Any, Any]
  server_message: Callable[[Any], Any]
  client_state_type: Any
  server_state_type: Any
  data_type: Any
  server_update: Callable[[Any], tff.Computation]
  full_gradient: Callable[..., Any] | None = None
  round_state: Callable[[Any], tff.Computation] | None = None


def _broadcast(parts: NextParts, state):
  """x and the server's message, each broadcast to the clients."""
  return (
      tff.federated_broadcast(state.global_model_weights),
      tff.federated_broadcast(parts.server_message(state)),
  )


def values(parts: NextParts) -> tff.Computation:
  """`next`: broadcast x and c, map the client step, sum, map the server step."""

  @tff.tensorflow.computation(
      *parts.broadcast_types, parts.client_state_type, parts.data_type
  )
  def client_update_fn(initial_weights, message, client_state, dataset):
    return parts.client_step(initial_weights, message, client_state, dataset)

  server_update_fn = parts.server_update(
      client_update_fn.type_signature.result[1]
  )

  @tff.federated_computation(
      tff.FederatedType(parts.server_state_type, tff.SERVER),
      tff.FederatedType(parts.data_type, tff.CLIENTS),
      tff.FederatedType(parts.client_state_type, tff.CLIENTS),
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
  c_i, runs `client_step` and writes c_i+ before its sums are returned.
  """
  client_state_spec = tff.types.type_to_tf_tensor_specs(parts.client_state_type)

  @tff.tensorflow.computation(*parts.broadcast_types, np.str_, parts.data_type)
  def client_update_fn(initial_weights, message, prefix, data):
    client_state = state_files.read_client_state(prefix, client_state_spec)
    new_client_state, sums = parts.client_step(
        initial_weights, message, client_state, data
    )
    writes = state_files.write_client_state(prefix, new_client_state)
    with tf.control_dependencies(writes):
      return tf.nest.map_structure(tf.identity, sums)

  server_update_fn = parts.server_update(client_update_fn.type_signature.result)

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
  full-batch gradients at x summed, then the server's `round_state`."""

  @tff.tensorflow.computation(parts.broadcast_types[0], parts.data_type)
  def full_gradient_fn(initial_weights, dataset):
    return parts.full_gradient(initial_weights, dataset)

  round_state_fn = parts.round_state(full_gradient_fn.type_signature.result)

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
  `parts.full_gradient` (MIME) the round first sums the clients' full-batch
  gradients at x and replaces the server vector (`round_state`), then
  broadcasts it."""

  @tff.tensorflow.computation(*parts.broadcast_types, parts.data_type)
  def client_update_fn(initial_weights, message, dataset):
    return parts.client_step(initial_weights, message, None, dataset)[1]

  server_update_fn = parts.server_update(client_update_fn.type_signature.result)
  full_gradient_step = None
  if parts.full_gradient is not None:
    full_gradient_step = _full_gradient_step(parts)

  @tff.federated_computation(
      tff.FederatedType(parts.server_state_type, tff.SERVER),
      tff.FederatedType(parts.data_type, tff.CLIENTS),
  )
  def next_fn(state, client_data):
    model_weights = tff.federated_broadcast(state.global_model_weights)
    if full_gradient_step is not None:
      state = full_gradient_step(state, model_weights, client_data)
    message = tff.federated_broadcast(parts.server_message(state))
    sums = tff.federated_sum(
        tff.federated_map(
            client_update_fn, (model_weights, message, client_data)
        )
    )
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  return next_fn
