"""The server of a per-client-state process: round sums, server and window step."""

import collections
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.algorithms import scheduled_client_work
from tff_fedwin.algorithms.client_state import algorithm as algorithm_lib
from tff_fedwin.algorithms.client_state import types


@tf.function
def round_sums_summand(result: types.ClientResult) -> types.RoundSums:
  """One client's contribution to the round's sums (weights applied)."""

  def weighted(t):
    return tf.cast(result.client_weight, t.dtype) * t

  return types.RoundSums(
      weighted_model_delta=tf.nest.map_structure(weighted, result.model_delta),
      weighted_non_trainable_weights=tf.nest.map_structure(
          weighted, result.non_trainable_weights
      ),
      control_variate_delta=result.control_variate_delta,
      client_weight=result.client_weight,
      num_examples=result.num_examples,
      loss_sum=result.loss_sum,
      num_clients_with_data=tf.cast(result.client_weight > 0, tf.int32),
  )


def server_step(
    algorithm: algorithm_lib.ClientStateAlgorithm,
    model_weights: tff.learning.models.ModelWeights,
    control_variate: Any,
    sums: types.RoundSums,
    *,
    server_learning_rate: float,
    total_clients: int,
) -> tuple[tff.learning.models.ModelWeights, Any]:
  """The server step of a round (TF, in a graph).

  The mean model delta `sum_i(w_i dy_i) / sum_i(w_i)` goes to the
  algorithm's `server_update` with the sum of the vector changes; the
  non-trainable weights become `sum_i(w_i v_i) / sum_i(w_i)`. When no
  sampled client had data (`sum_i w_i` = 0) x and the non-trainable weights
  are returned unchanged, and the server vector moves by the (zero) sum of
  the vector changes as the algorithm says.

  Args:
    algorithm: The `ClientStateAlgorithm`.
    model_weights: The global model x, a `ModelWeights`.
    control_variate: The server's vector (trainable structure).
    sums: The round's `types.RoundSums`.
    server_learning_rate: lr_g.
    total_clients: N, the number of clients in the population.

  Returns:
    `(new_model_weights, new_server_vector)`, same structures as the inputs.
  """
  client_weight_sum = sums.client_weight
  has_data = client_weight_sum > 0

  def mean(value_sum):
    return tf.math.divide_no_nan(
        value_sum, tf.cast(client_weight_sum, value_sum.dtype)
    )

  new_trainable, new_vector = algorithm.server_update(
      algorithm_lib.ServerRound(
          trainable=model_weights.trainable,
          server_vector=control_variate,
          mean_model_delta=tf.nest.map_structure(
              mean, sums.weighted_model_delta
          ),
          vector_delta_sum=sums.control_variate_delta,
          client_weight_sum=client_weight_sum,
          total_clients=total_clients,
          server_learning_rate=server_learning_rate,
      )
  )
  keep_without_data = lambda new, old: tf.where(has_data, new, old)
  new_model_weights = tff.learning.models.ModelWeights(
      trainable=tf.nest.map_structure(
          keep_without_data, new_trainable, model_weights.trainable
      ),
      non_trainable=tf.nest.map_structure(
          lambda v, value_sum: keep_without_data(mean(value_sum), v),
          model_weights.non_trainable,
          sums.weighted_non_trainable_weights,
      ),
  )
  return new_model_weights, new_vector


@tf.function
def with_round_vector(
    algorithm: algorithm_lib.ClientStateAlgorithm,
    state: types.ServerState,
    sums: Any,
) -> types.ServerState:
  """`state` with the round's server vector, from the full-gradient sums (TF).

  c = sum_i w_i grad f_i(x) / sum_i w_i over the round's clients, then the
  algorithm's `round_vector(v, c)` (MIME's momentum update); a round
  without data keeps v.

  Args:
    algorithm: A `ClientStateAlgorithm` with `uses_full_gradient`.
    state: The server state S.
    sums: The round's sum of `reference_gradient.GradientSum`s.
  """
  weight = sums.client_weight
  mean = tf.nest.map_structure(
      lambda t: tf.math.divide_no_nan(t, tf.cast(weight, t.dtype)),
      sums.weighted_gradient,
  )
  vector = algorithm_lib.with_data(
      weight,
      algorithm.round_vector(state.control_variate, mean),
      state.control_variate,
  )
  return state._replace(control_variate=vector)


def next_server_state(
    algorithm: algorithm_lib.ClientStateAlgorithm,
    state: types.ServerState,
    sums: types.RoundSums,
    *,
    server_learning_rate: float,
    total_clients: int,
    with_window: bool,
    client_learning_rate_fn: Any = None,
) -> tuple[types.ServerState, collections.OrderedDict]:
  """The server state after a round, and the round's metrics (TF, in a graph).

  Runs `server_step`, then with a window pushes w^t into it (in
  `'broadcast'` mode at active rounds x becomes m^t; the server vector is
  never windowed). A new `ServerState` field is carried over by `_replace`.
  The metrics hold `train_loss`, `num_examples`, `num_clients_with_data`
  and with a window `window`. With the clients' schedule
  `client_learning_rate_fn`, they also hold the round's rate lr_t as
  `client_work/client_learning_rate` (the model-delta clients' name), t =
  the state's completed rounds + 1, the t the clients' step evaluated.
  """
  new_model_weights, new_control_variate = server_step(
      algorithm,
      state.global_model_weights,
      state.control_variate,
      sums,
      server_learning_rate=server_learning_rate,
      total_clients=total_clients,
  )
  metrics = collections.OrderedDict(
      train_loss=tf.math.divide_no_nan(
          sums.loss_sum, tf.cast(sums.num_examples, tf.float32)
      ),
      num_examples=sums.num_examples,
      num_clients_with_data=sums.num_clients_with_data,
  )
  if client_learning_rate_fn is not None:
    metrics['client_work'] = collections.OrderedDict(
        client_learning_rate=scheduled_client_work.rate_of_next_round(
            client_learning_rate_fn, state.round_num
        )
    )
  window = state.window
  if with_window:
    window, new_model_weights, metrics['window'] = window_math.window_step(
        window, new_model_weights
    )
  new_state = state._replace(
      global_model_weights=new_model_weights,
      control_variate=new_control_variate,
      round_num=state.round_num + 1,
      window=window,
  )
  return new_state, metrics


def evaluation_model_weights(
    state: types.ServerState, *, with_window: bool
) -> tff.learning.models.ModelWeights:
  """The model to evaluate (TF, in a graph): the window model, else x.

  In `'evaluate'` mode at active rounds the window mean m^t (trainable) with
  x's non-trainable weights; otherwise x (in `'broadcast'` mode x already is
  m^t at active rounds).
  """
  weights = state.global_model_weights
  if not with_window:
    return weights
  return tff.learning.models.ModelWeights(
      window_math.evaluated_trainable(state.window, weights.trainable),
      weights.non_trainable,
  )
