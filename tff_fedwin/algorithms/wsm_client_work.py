"""Model-delta client work that trains with the WSM loss (DESIGN.md sec. 2.2).

`build_wsm_client_work` is a drop-in replacement for TFF's
`tff.learning.templates.build_model_delta_client_work`: the same state (the
client optimizer's hyperparameters, with `get_hparams`/`set_hparams`), the same
`tff.learning.templates.ClientResult` (update = initial - trained trainable
weights, update weight) and the same measurements (`train` = the finalized
model metrics), so it composes unchanged with
`tff.learning.templates.compose_learning_process`, with the window finalizer of
`tff_fedwin.algorithms.build_fed_win` and with
`tff_fedwin.algorithms.build_scheduled_client_work`.

Only the local training loss differs. Each client, in each round:

1. makes one pass over its dataset to compute its class proportions
   `beta_c = n_c / n` (Legate et al., "Re-weighted softmax cross-entropy to
   control forgetting in federated learning", Eq. 4;
   `tff_fedwin.losses.class_proportions_from_dataset`);
2. trains locally from the received model w_global, one optimizer step per
   batch b on

     L_b(w) = 1/|b| sum_{(x,y) in b} -log(beta_y e^{z_y} / sum_c beta_c e^{z_c})
              + (mu / 2) ||w - w_global||^2,        z = f_w(x) (logits),

   the WSM cross-entropy (`tff_fedwin.losses.wsm_cross_entropy`, equal in
   gradient to the paper's Eq. 4) plus, for `proximal_strength` mu > 0, the
   FedProx term (Li et al. 2020, Eq. 2) on the trainable weights.

The model's metrics (loss, accuracy, ...) are still updated by its own forward
pass, so the reported training metrics use the model's plain loss (DESIGN.md
sec. 2.2: evaluation and reported metrics use plain cross-entropy).
"""

import collections
from collections.abc import Callable, Mapping
import functools
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.losses import wsm

ModelFn = Callable[[], tff.learning.models.VariableModel]


def _labels_of(batch: Any, label_key: str) -> tf.Tensor:
  """The labels of a batch: `batch[label_key]` for mappings, else `batch[1]`."""
  if isinstance(batch, Mapping):
    return batch[label_key]
  return batch[1]


def _zero_all_if_any_non_finite(structure: Any) -> tuple[Any, tf.Tensor]:
  """Returns `(structure, True)` if all finite, else `(zeros, False)`."""
  flat = tf.nest.flatten(structure)
  if not flat:
    return structure, tf.constant(True)
  all_finite = functools.reduce(
      tf.logical_and, [tf.reduce_all(tf.math.is_finite(t)) for t in flat])
  zeroed = tf.nest.map_structure(
      lambda t: tf.where(all_finite, t, tf.zeros_like(t)), structure)
  return zeroed, all_finite


def _build_wsm_client_update(
    model_fn: ModelFn,
    *,
    num_classes: int,
    weighting: tff.learning.ClientWeighting,
    label_key: str,
    proximal_strength: float,
) -> Callable[..., Any]:
  """Creates the client step as a `tf.function` (builds the model).

  Call inside the graph that runs the step (a `tff.tensorflow.computation`).

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`
      whose `forward_pass(...).predictions` are logits [batch, num_classes].
    num_classes: The number of classes C.
    weighting: A `tff.learning.ClientWeighting`.
    label_key: The labels' key in mapping batches (tuple batches: element 1).
    proximal_strength: The FedProx coefficient mu >= 0.

  Returns:
    `client_update(optimizer, initial_weights, data, optimizer_hparams)`,
    returning `(tff.learning.templates.ClientResult, unfinalized_metrics)`.
  """
  model = model_fn()

  @tf.function
  def client_update(optimizer, initial_weights, data, optimizer_hparams=None):
    model_weights = tff.learning.models.ModelWeights.from_model(model)
    tf.nest.map_structure(
        lambda a, b: a.assign(b), model_weights, initial_weights)
    # Pass 1: the client's class proportions beta over its whole dataset.
    class_proportions = wsm.class_proportions_from_dataset(
        data, num_classes, label_key)

    def reduce_fn(state, batch):
      """One optimizer step on the batch's WSM (+ proximal) loss."""
      num_examples_sum, optimizer_state = state
      with tf.GradientTape() as tape:
        # Updates the model's metrics with its plain loss.
        output = model.forward_pass(batch, training=True)
        batch_loss = tf.reduce_mean(
            wsm.wsm_cross_entropy(
                _labels_of(batch, label_key), output.predictions,
                class_proportions))
      gradients = tape.gradient(batch_loss, model_weights.trainable)
      gradients = tf.nest.map_structure(
          lambda g, v: tf.zeros_like(v) if g is None else g,
          gradients, model_weights.trainable)
      if proximal_strength > 0:
        # d/dw (mu / 2) ||w - w_global||^2 = mu (w - w_global).
        gradients = tf.nest.map_structure(
            lambda g, v, v0: g + tf.cast(proximal_strength, v.dtype) * (
                v - tf.cast(v0, v.dtype)),
            gradients, model_weights.trainable, initial_weights.trainable)
      optimizer_state, updated_weights = optimizer.next(
          optimizer_state,
          tuple(tf.nest.flatten(model_weights.trainable)),
          tuple(tf.nest.flatten(gradients)),
      )
      updated_weights = tf.nest.pack_sequence_as(
          model_weights.trainable, updated_weights)
      tf.nest.map_structure(
          lambda a, b: a.assign(b), model_weights.trainable, updated_weights)
      if output.num_examples is None:
        num_examples_sum += tf.shape(output.predictions, out_type=tf.int64)[0]
      else:
        num_examples_sum += tf.cast(output.num_examples, tf.int64)
      return num_examples_sum, optimizer_state

    trainable_tensor_specs = tf.nest.map_structure(
        lambda v: tf.TensorSpec(v.shape, v.dtype),
        tuple(tf.nest.flatten(model_weights.trainable)),
    )
    optimizer_state = optimizer.initialize(trainable_tensor_specs)
    if optimizer_hparams is not None:
      optimizer_state = optimizer.set_hparams(
          optimizer_state, optimizer_hparams)
    # Pass 2: local training.
    num_examples, _ = data.reduce(
        (tf.zeros([], tf.int64), optimizer_state), reduce_fn)

    client_update = tf.nest.map_structure(
        tf.subtract, initial_weights.trainable, model_weights.trainable)
    client_update, all_finite = _zero_all_if_any_non_finite(client_update)
    if weighting == tff.learning.ClientWeighting.NUM_EXAMPLES:
      client_weight = tf.cast(num_examples, tf.float32)
    else:
      client_weight = tf.constant(1.0, tf.float32)
    # Empty dataset (update 0) or non-finite update (zeroed): weight 0.
    client_weight = tf.where(
        tf.logical_and(all_finite, num_examples > 0), client_weight, 0.0)
    if not all_finite:
      # As TFF: exclude the non-finite training metrics from the aggregate.
      model.reset_metrics()
    return (
        tff.learning.templates.ClientResult(
            update=client_update, update_weight=client_weight),
        model.report_local_unfinalized_metrics(),
    )

  return client_update


def build_wsm_client_work(
    model_fn: ModelFn,
    optimizer: tff.learning.optimizers.Optimizer,
    *,
    num_classes: int,
    client_weighting: tff.learning.ClientWeighting = (
        tff.learning.ClientWeighting.NUM_EXAMPLES),
    metrics_aggregator: Optional[Any] = None,
    label_key: str = 'y',
    proximal_strength: float = 0.0,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds a model-delta `ClientWorkProcess` training with the WSM loss.

  Per client and round: beta_c = n_c / n over the client's dataset (one pass),
  then one `optimizer` step per batch b on

    L_b(w) = 1/|b| sum_{(x, y) in b} -log(beta_y e^{z_y} / sum_c beta_c e^{z_c})
             + (mu / 2) ||w - w_global||^2,

  z = f_w(x) the logits, mu = `proximal_strength` (WSM paper Eq. 4 up to a
  per-example constant, see `tff_fedwin.losses.wsm_cross_entropy`; FedProx Eq.
  2 on the trainable weights). The update is `w_global - w` on the trainable
  weights. Classes with beta_c = 0 are masked out of the softmax (no NaN).

  Type signatures, identical to those of
  `tff.learning.templates.build_model_delta_client_work(model_fn, optimizer,
  client_weighting)` for the same model and optimizer (`H` = the optimizer's
  hyperparameters, e.g. `<learning_rate=float32>` for SGD):

    initialize: `( -> H@SERVER)`
    next: `(<H@SERVER, ModelWeights@CLIENTS, {B*}@CLIENTS> ->
           <state=H@SERVER,
            result=ClientResult<update=T, update_weight=float32>@CLIENTS,
            measurements=<train=M>@SERVER>)`
    get_hparams: `(H -> H)`; set_hparams: `(<H, H> -> H)`.

  `T` is the trainable-weights type, `B` the model's `input_spec`, `M` the
  finalized model metrics. Setting `learning_rate` in the state (as
  `build_scheduled_client_work` does) sets the client learning rate.

  Requirements on the model: `forward_pass(batch).predictions` must be the
  LOGITS, shape [batch, num_classes] (e.g. a Keras model without a final
  softmax, compiled with a `from_logits=True` loss); batches hold integer
  labels of shape [batch] or [batch, 1] under `label_key` (mapping batches) or
  at index 1 (tuple batches). The model's own loss, including any Keras
  regularization losses, is used only for the reported metrics; it does not
  enter training.

  Client weight: the number of examples (`NUM_EXAMPLES`) or 1 (`UNIFORM`), as
  in TFF; but 0, with a zero update, for a client with an empty dataset (under
  either weighting) and, as in TFF, for a non-finite update (then its metrics
  are reset).

  Args:
    model_fn: No-arg callable returning a new
      `tff.learning.models.VariableModel` (see requirements above).
    optimizer: The client `tff.learning.optimizers.Optimizer`.
    num_classes: The number of classes C >= 1 (the logits' last dimension).
    client_weighting: A `tff.learning.ClientWeighting`.
    metrics_aggregator: As in `build_model_delta_client_work`; default
      `tff.learning.metrics.sum_then_finalize`.
    label_key: The labels' key in mapping batches.
    proximal_strength: The FedProx coefficient mu >= 0; 0 disables the term.

  Returns:
    A `tff.learning.templates.ClientWorkProcess`.

  Raises:
    TypeError: If `client_weighting` is not a `tff.learning.ClientWeighting`,
      or the labels are not integers.
    ValueError: If `num_classes` < 1 or `proximal_strength` < 0.
    KeyError: If mapping batches have no `label_key`.

  At run time, a label outside [0, num_classes) fails the computation with
  the WSM error ("WSM labels are out of range ... num_classes = C").
  """
  if not isinstance(client_weighting, tff.learning.ClientWeighting):
    raise TypeError(
        '`client_weighting` must be a tff.learning.ClientWeighting, got '
        f'{client_weighting!r}.')
  if (not isinstance(num_classes, int) or isinstance(num_classes, bool)
      or num_classes < 1):
    raise ValueError(f'`num_classes` must be an int >= 1, got {num_classes!r}.')
  if (not isinstance(proximal_strength, (int, float))
      or isinstance(proximal_strength, bool) or not proximal_strength >= 0):
    raise ValueError(
        '`proximal_strength` must be a number >= 0, got '
        f'{proximal_strength!r}.')
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize

  with tf.Graph().as_default():
    # A throwaway graph: the model's variables must not leak into the caller's.
    model = model_fn()
    metrics_aggregation_fn = metrics_aggregator(model.metric_finalizers())
  element_type = tff.types.tensorflow_to_type(model.input_spec)
  data_type = tff.SequenceType(element_type)
  weights_type = tff.learning.models.weights_type_from_model(model)

  # The optimizer's initial hyperparameters, from a placeholder spec.
  whimsy_opt_state = optimizer.initialize(tf.TensorSpec([], tf.float32))
  initial_hparams = optimizer.get_hparams(whimsy_opt_state)

  @tff.federated_computation
  def init_fn():
    return tff.federated_value(initial_hparams, tff.SERVER)

  # The state is exactly the optimizer's hyperparameters.
  state_type = init_fn.type_signature.result.member
  hparams_type = state_type

  @tff.tensorflow.computation(state_type)
  def get_hparams_fn(state):
    return state

  @tff.tensorflow.computation(state_type, hparams_type)
  def set_hparams_fn(state, hparams):
    del state
    return hparams

  @tff.tensorflow.computation(state_type, weights_type, data_type)
  def client_update_computation(state, initial_model_weights, dataset):
    client_update = _build_wsm_client_update(
        model_fn,
        num_classes=num_classes,
        weighting=client_weighting,
        label_key=label_key,
        proximal_strength=float(proximal_strength),
    )
    return client_update(optimizer, initial_model_weights, dataset, state)

  @tff.federated_computation(
      init_fn.type_signature.result,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, weights, client_data):
    state_at_clients = tff.federated_broadcast(state)
    client_result, model_outputs = tff.federated_map(
        client_update_computation, (state_at_clients, weights, client_data))
    train_metrics = metrics_aggregation_fn(model_outputs)
    measurements = tff.federated_zip(
        collections.OrderedDict(train=train_metrics))
    return tff.templates.MeasuredProcessOutput(
        state, client_result, measurements)

  return tff.learning.templates.ClientWorkProcess(
      init_fn,
      next_fn,
      get_hparams_fn=get_hparams_fn,
      set_hparams_fn=set_hparams_fn,
  )
