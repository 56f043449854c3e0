"""The client of a per-client-state process: corrected local SGD, new vector."""

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import reference_gradient
from tff_fedwin.algorithms import scheduled_client_work
from tff_fedwin.algorithms import sharpness as sharpness_lib
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm as algorithm_lib
from tff_fedwin.algorithms.client_state import types
from tff_fedwin.losses import labels as labels_lib

ModelFn = Callable[[], tff.learning.models.VariableModel]

# Where WSM reads the labels of a mapping batch (tuple batches: element 1).
LABEL_KEY = labels_lib.DEFAULT_LABEL_KEY


def model_weights_specs(model_fn: ModelFn) -> tff.learning.models.ModelWeights:
  """The `tf.TensorSpec`s of the model's weights, built in a throwaway graph.

  Raises:
    ValueError: If `model_fn` does not build a `VariableModel`.
  """
  with tf.Graph().as_default():
    model = model_fn()
    if not isinstance(model, tff.learning.models.VariableModel):
      raise ValueError(
          '`model_fn` must return a `tff.learning.models.VariableModel`, got '
          f'{type(model).__name__}.'
      )
    weights = tff.learning.models.ModelWeights.from_model(model)
    return tf.nest.map_structure(
        lambda v: tf.TensorSpec(v.shape, v.dtype), weights
    )


def initial_client_state(
    model_fn: ModelFn,
    algorithm: algorithm_lib.ClientStateAlgorithm | None = None,
) -> types.ClientState | types.RoundClientState:
  """The initial state of every client: a zero vector, as numpy arrays.

  Args:
    model_fn: A no-arg callable returning a `tff.learning.models.VariableModel`.
    algorithm: The `ClientStateAlgorithm`; with `tracks_rounds` the state is a
      `types.RoundClientState` with `last_round` 0. None: a `ClientState`.

  Returns:
    A `types.ClientState` whose `control_variate` holds numpy zeros with the
    structure, shapes and dtypes of the model's trainable weights (the
    template of a `tff_fedwin.training.ClientStateStore`).
  """
  specs = model_weights_specs(model_fn)
  zeros = tf.nest.map_structure(
      lambda s: np.zeros(s.shape, s.dtype.as_numpy_dtype), specs.trainable
  )
  if algorithm is not None and algorithm.tracks_rounds:
    return types.RoundClientState(zeros, np.float32(0))
  return types.ClientState(control_variate=zeros)


def build_full_gradient(
    model_fn: ModelFn,
    *,
    client_loss: str = 'ce',
    num_classes: int | None = None,
) -> Callable[..., reference_gradient.GradientSum]:
  """Builds a client's full-batch gradient at x as a `tf.function`.

  `full_gradient(initial_weights, dataset) -> GradientSum`: grad f_i(x), the
  gradient of the client's mean training loss (the model's, or WSM's with
  its class proportions) over one pass of `dataset` at `initial_weights`
  (`reference_gradient.full_gradient`), weight 1; zeros and weight 0 for an
  empty dataset. MIME's first step of a round (docs/design.md sec. 4.9).
  Call inside the graph that runs it (builds the model).
  """
  training = client_training.build_client_training(
      client_loop.build_client_model(model_fn),
      optimizer_step=step_hooks.sgd_step(0.0),
      client_loss=client_loss,
      num_classes=num_classes,
      label_key=LABEL_KEY,
  )

  @tf.function
  def full_gradient(initial_weights, dataset):
    step_state = training.client_init(initial_weights, dataset)
    return reference_gradient.full_gradient(
        lambda batch: training.batch_gradient(step_state, batch),
        training.model_weights.trainable,
        dataset,
    )

  return full_gradient


def build_client_update(
    model_fn: ModelFn,
    algorithm: algorithm_lib.ClientStateAlgorithm,
    client_learning_rate: float,
    *,
    client_loss: str = 'ce',
    num_classes: int | None = None,
    weight_decay: float = 0.0,
    sharpness: sharpness_lib.Sharpness | None = None,
    loop_implementation: client_loop.LoopForm | None = None,
    client_learning_rate_fn: Callable[[tf.Tensor], tf.Tensor] | None = None,
) -> Callable[..., tuple[types.ClientState, types.ClientResult]]:
  """Builds the client step of `algorithm` as a `tf.function` (builds the model).

  Call inside the graph that runs the step (a `tff.tensorflow.computation`),
  or eagerly in tests. The returned `client_update(initial_weights,
  server_vector, client_state, dataset, round_num=None)` (`round_num`, the
  rounds completed, with `tracks_rounds`, a feature step or a schedule)
  runs, on the client-training core, from y = s (the algorithm's
  `client_start` of `initial_weights`, x by default) one step
  `y <- y - lr T(g(y))` per batch, T the algorithm's `gradient_transform`
  with its `step_input` (g(y) + wd y with `weight_decay` wd), then the
  algorithm's `new_client_vector` with K the number of batches. It returns
  `(ClientState(new vector), ClientResult)`, dy = y - s; for an empty
  dataset the vector is unchanged, dy = 0 and the client weight is 0. For an
  algorithm without client states `client_state` is None and so is the
  returned state; the result carries the vector the client sends.

  g is the gradient of the model's loss (`'ce'`) or of the mean WSM
  cross-entropy with the client's class proportions (`'wsm'`, docs/design.md
  sec. 2; labels `batch['y']` or `batch[1]`). `loss_sum` always uses the
  model's own loss.

  Args:
    model_fn: A no-arg callable returning a `tff.learning.models.VariableModel`.
    algorithm: The `ClientStateAlgorithm` (SCAFFOLD, FedDyn).
    client_learning_rate: The client learning rate lr.
    client_loss: One of `client_training.CLIENT_LOSSES`.
    num_classes: The number of classes C; required for `'wsm'`.
    weight_decay: wd >= 0, the client weight decay
      (`step_hooks.weight_decay_gradient`); 0 adds nothing.
    sharpness: A `sharpness.Sharpness`: g(y) is taken at y + e, SAM's or
      ASAM's ascent step (FedSAM/FedASAM clients); None: plain.
    loop_implementation: The loop over the batches: a form of
      `client_loop.LOOP_FORMS`, or `None`: `HELD_BATCHES`
      (`client_loop.client_loop`).
    client_learning_rate_fn: The client schedule, round t (int32, 1-based)
      -> lr_t (`scheduled_client_work`'s); the step then takes `round_num`
      (rounds completed) and lr_t replaces `client_learning_rate` in the
      steps and in `new_client_vector`. None: the constant rate.

  Returns:
    The client step, a `tf.function`.

  Raises:
    ValueError: If `client_loss` is not one of
      `client_training.CLIENT_LOSSES`, `'wsm'` is asked without a positive
      `num_classes`, or `loop_implementation` is not a form of
      `client_loop.LOOP_FORMS` or `None`.
  """
  loop_implementation = client_loop.client_loop(loop_implementation)
  training = client_training.build_client_training(
      client_loop.build_client_model(model_fn),
      optimizer_step=step_hooks.sgd_step(client_learning_rate),
      client_loss=client_loss,
      num_classes=num_classes,
      label_key=LABEL_KEY,
      gradient_transform=algorithm.gradient_transform,
      weight_decay=weight_decay,
      sharpness=sharpness,
      subtract_start_gradient=algorithm.subtracts_start_gradient,
      feature_step=algorithm.feature_step,
  )
  feature_step = algorithm.feature_step

  def round_rate(round_num):
    """(lr_t, the optimizer's hparams): the schedule's at t = round_num + 1,
    else the constant rate and None."""
    if client_learning_rate_fn is None:
      return client_learning_rate, None
    rate = scheduled_client_work.rate_of_next_round(
        client_learning_rate_fn, round_num
    )
    return rate, {'learning_rate': rate}

  def train(initial_weights, server_vector, client_vector, dataset, round_num):
    """`(client_output, its new vector, lr_t)`; `client_vector` None: none
    kept."""
    learning_rate, hparams = round_rate(round_num)
    start = tff.learning.models.ModelWeights(
        algorithm.client_start(initial_weights.trainable, server_vector),
        initial_weights.non_trainable,
    )
    feature_state, step_input = (), ()
    if feature_step is not None:
      feature_state = feature_step.initial_state(
          server_vector, round_num, training.model
      )
    if algorithm.gradient_transform is not None:
      step_input = algorithm.step_input(
          start.trainable, server_vector, client_vector
      )
    output = client_loop.train_client(
        training,
        start,
        dataset,
        step_input,
        optimizer_hparams=hparams,
        loop_implementation=loop_implementation,
        feature_state=feature_state,
    )
    return output, learning_rate

  @tf.function
  def client_update(
      initial_weights, server_vector, client_state, dataset, round_num=None
  ):
    client_vector, rounds_since = None, 1.0
    if algorithm.keeps_client_state:
      client_vector = client_state.control_variate
    if algorithm.tracks_rounds:
      # The round t being run (`round_num` completed).
      t = tf.cast(round_num + 1, tf.float32)
      rounds_since = t - client_state.last_round
    output, learning_rate = train(
        initial_weights, server_vector, client_vector, dataset, round_num
    )
    if feature_step is not None:
      new_client_vector = feature_step.sent_vector(
          output.feature_state, server_vector, output.num_examples
      )
    else:
      new_client_vector = algorithm.new_client_vector(
          algorithm_lib.ClientRound(
              client_vector=client_vector,
              server_vector=server_vector,
              model_delta=output.model_delta,
              num_steps=output.num_steps,
              learning_rate=learning_rate,
              rounds_since_last=tf.cast(rounds_since, tf.float32),
          )
      )
    sent_vector, new_state = new_client_vector, None
    if algorithm.keeps_client_state:
      sent_vector = tf.nest.map_structure(
          tf.subtract, new_client_vector, client_vector
      )
      new_state = types.ClientState(new_client_vector)
    if algorithm.tracks_rounds:
      # A client without data keeps its vector and its last round.
      last_round = tf.where(output.num_steps > 0, t, client_state.last_round)
      new_state = types.RoundClientState(new_client_vector, last_round)
    return new_state, types.ClientResult(
        model_delta=tf.nest.map_structure(tf.negative, output.model_delta),
        control_variate_delta=sent_vector,
        non_trainable_weights=tf.nest.map_structure(
            tf.identity, training.model_weights.non_trainable
        ),
        client_weight=tf.cast(output.num_steps > 0, tf.float32),
        num_examples=output.num_examples,
        loss_sum=output.loss_sum,
    )

  return client_update
