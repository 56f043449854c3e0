"""The SCAFFOLD server: the round's sums, the server step, the window step."""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.algorithms.scaffold import types


@tf.function
def round_sums_summand(result: types.ScaffoldClientResult) -> types.RoundSums:
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


@tf.function
def scaffold_server_update(
    model_weights,
    control_variate,
    *,
    weighted_model_delta_sum,
    weighted_non_trainable_sum,
    control_variate_delta_sum,
    client_weight_sum,
    server_learning_rate: float,
    total_clients: int,
):
  """The SCAFFOLD server step (Karimireddy et al. 2020, Algorithm 1, l. 16-17).

  `x <- x + lr_g * sum_i(w_i dy_i) / sum_i(w_i)`, non-trainable weights
  `<- sum_i(w_i v_i) / sum_i(w_i)`, and `c <- c + sum_i(dc_i) / N`. When
  `client_weight_sum` is 0 (no sampled client had data) x and the
  non-trainable weights are returned unchanged.

  Args:
    model_weights: The global model x, a `tff.learning.models.ModelWeights`.
    control_variate: The server control variate c (trainable structure).
    weighted_model_delta_sum: sum_i w_i dy_i (trainable structure).
    weighted_non_trainable_sum: sum_i w_i v_i of the clients' final
      non-trainable weights (non-trainable structure).
    control_variate_delta_sum: sum_i dc_i (trainable structure).
    client_weight_sum: sum_i w_i, a float32 scalar.
    server_learning_rate: lr_g.
    total_clients: N, the number of clients in the population.

  Returns:
    `(new_model_weights, new_control_variate)`, same structures as the inputs.
  """
  has_data = client_weight_sum > 0

  def new_trainable(x, delta_sum):
    mean_delta = tf.math.divide_no_nan(
        delta_sum, tf.cast(client_weight_sum, x.dtype)
    )
    return x + tf.cast(server_learning_rate, x.dtype) * mean_delta

  def new_non_trainable(v, value_sum):
    mean_value = tf.math.divide_no_nan(
        value_sum, tf.cast(client_weight_sum, v.dtype)
    )
    return tf.where(has_data, mean_value, v)

  def new_control(c, delta_sum):
    return c + delta_sum / tf.cast(total_clients, c.dtype)

  new_model_weights = tff.learning.models.ModelWeights(
      trainable=tf.nest.map_structure(
          new_trainable, model_weights.trainable, weighted_model_delta_sum
      ),
      non_trainable=tf.nest.map_structure(
          new_non_trainable,
          model_weights.non_trainable,
          weighted_non_trainable_sum,
      ),
  )
  new_control_variate = tf.nest.map_structure(
      new_control, control_variate, control_variate_delta_sum
  )
  return new_model_weights, new_control_variate


@tf.function
def round_metrics(sums: types.RoundSums) -> collections.OrderedDict:
  """The round's `train_loss`, `num_examples` and `num_clients_with_data`."""
  return collections.OrderedDict(
      train_loss=tf.math.divide_no_nan(
          sums.loss_sum, tf.cast(sums.num_examples, tf.float32)
      ),
      num_examples=sums.num_examples,
      num_clients_with_data=sums.num_clients_with_data,
  )


def next_server_state(
    state: types.ScaffoldServerState,
    sums: types.RoundSums,
    *,
    server_learning_rate: float,
    total_clients: int,
    with_window: bool,
) -> tuple[types.ScaffoldServerState, collections.OrderedDict]:
  """The server state after a round, and the round's metrics (TF, in a graph).

  Runs `scaffold_server_update`, then with a window pushes w^t into it (in
  `'broadcast'` mode at active rounds x becomes m^t; c is never windowed).
  A new `ScaffoldServerState` field is carried over by `_replace`.
  """
  new_model_weights, new_control_variate = scaffold_server_update(
      state.global_model_weights,
      state.control_variate,
      weighted_model_delta_sum=sums.weighted_model_delta,
      weighted_non_trainable_sum=sums.weighted_non_trainable_weights,
      control_variate_delta_sum=sums.control_variate_delta,
      client_weight_sum=sums.client_weight,
      server_learning_rate=server_learning_rate,
      total_clients=total_clients,
  )
  metrics = round_metrics(sums)
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
    state: types.ScaffoldServerState, *, with_window: bool
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
