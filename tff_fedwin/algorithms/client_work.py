"""Model-delta client work on the client-training core: CE or WSM, FedProx.

`build_client_work` is a drop-in for TFF's
`tff.learning.templates.build_model_delta_client_work` (same state, result and
measurements, identical type signatures) that also trains with the WSM loss
and the FedProx term; `build_wsm_client_work` is it with the WSM loss
(docs/design.md sec. 2, 4.5).
"""

import collections
from collections.abc import Callable
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import fednova as fednova_lib
from tff_fedwin.algorithms import sharpness as sharpness_lib
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.losses import labels as labels_lib

ModelFn = Callable[[], tff.learning.models.VariableModel]
NUM_EXAMPLES = tff.learning.ClientWeighting.NUM_EXAMPLES
DATASET_REDUCE = tff.learning.LoopImplementation.DATASET_REDUCE


def _client_weight(weighting, output) -> tf.Tensor:
  """n (`NUM_EXAMPLES`) or 1 (`UNIFORM`); 0 if empty or not finite."""
  if weighting == NUM_EXAMPLES:
    weight = tf.cast(output.num_examples, tf.float32)
  else:
    weight = tf.constant(1.0, tf.float32)
  keep = tf.logical_and(output.all_finite, output.num_examples > 0)
  return tf.where(keep, weight, 0.0)


def _build_client_update(
    model_fn: ModelFn,
    optimizer: tff.learning.optimizers.Optimizer,
    *,
    client_loss: str,
    num_classes: Optional[int],
    label_key: str,
    proximal_strength: float,
    weight_decay: float,
    sharpness: Optional[sharpness_lib.Sharpness],
    fednova: Optional[fednova_lib.FedNova],
    weighting: tff.learning.ClientWeighting,
    loop_implementation: client_loop.LoopForm,
) -> Callable[..., Any]:
  """The client update as a `tf.function` (builds the model; call in a graph).

  Returns:
    `client_update(initial_weights, data, optimizer_hparams)`, returning
    `(tff.learning.templates.ClientResult, unfinalized_metrics)`.
  """
  transform = None
  if proximal_strength > 0:
    transform = step_hooks.proximal_gradient(proximal_strength)
  training = client_training.build_client_training(
      client_loop.build_client_model(model_fn),
      optimizer_step=step_hooks.tff_optimizer_step(optimizer),
      client_loss=client_loss,
      num_classes=num_classes,
      label_key=label_key,
      gradient_transform=transform,
      weight_decay=weight_decay,
      sharpness=sharpness,
  )
  model = training.model

  @tf.function
  def client_update(initial_weights, data, optimizer_hparams):
    step_input = initial_weights.trainable if transform is not None else ()
    output = client_loop.train_client(
        training,
        initial_weights,
        data,
        step_input,
        optimizer_hparams,
        loop_implementation,
    )
    update = client_training.zero_all_if_any_non_finite(
        output.model_delta, output.all_finite
    )
    if fednova is not None:
      update = fednova_lib.normalized_update(update, output.num_steps, fednova)
    if not output.all_finite:
      # As TFF: exclude the non-finite training metrics from the aggregate.
      model.reset_metrics()
    return (
        tff.learning.templates.ClientResult(
            update=update, update_weight=_client_weight(weighting, output)
        ),
        model.report_local_unfinalized_metrics(),
    )

  return client_update


def _hparams_computations(optimizer: tff.learning.optimizers.Optimizer):
  """`init_fn`, `get_hparams_fn`, `set_hparams_fn` of a state = hparams.

  The client work's state is exactly the optimizer's hyperparameters `H`, as
  in TFF's model-delta client work: `( -> H@SERVER)`, `(H -> H)`,
  `(<H, H> -> H)`.
  """
  # The optimizer's initial hyperparameters, from a placeholder spec.
  initial_hparams = optimizer.get_hparams(
      optimizer.initialize(tf.TensorSpec([], tf.float32))
  )

  @tff.federated_computation
  def init_fn():
    return tff.federated_value(initial_hparams, tff.SERVER)

  state_type = init_fn.type_signature.result.member

  @tff.tensorflow.computation(state_type)
  def get_hparams_fn(state):
    return state

  @tff.tensorflow.computation(state_type, state_type)
  def set_hparams_fn(state, hparams):
    del state
    return hparams

  return init_fn, get_hparams_fn, set_hparams_fn


def build_client_work(
    model_fn: ModelFn,
    optimizer: tff.learning.optimizers.Optimizer,
    *,
    client_loss: str = 'ce',
    num_classes: Optional[int] = None,
    proximal_strength: float = 0.0,
    weight_decay: float = 0.0,
    sharpness: Optional[sharpness_lib.Sharpness] = None,
    fednova: Optional[fednova_lib.FedNova] = None,
    client_weighting: tff.learning.ClientWeighting = NUM_EXAMPLES,
    metrics_aggregator: Optional[Any] = None,
    label_key: str = labels_lib.DEFAULT_LABEL_KEY,
    loop_implementation: client_loop.LoopForm = DATASET_REDUCE,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds a model-delta `ClientWorkProcess` on the client-training core.

  Each client starts from the received w_global and takes one `optimizer`
  step per batch b on

    L_b(w) + (mu / 2) ||w - w_global||^2 + (wd / 2) ||w||^2,

  mu = `proximal_strength` (FedProx, Li et al. 2020, Eq. 2); L_b, wd and
  `sharpness` as in `client_training.build_client_training`. The update is
  `w_global - w` on the trainable weights (docs/design.md sec. 4.5).

  Type signatures, identical to those of
  `tff.learning.templates.build_model_delta_client_work(model_fn, optimizer,
  client_weighting)` (H the optimizer's hyperparameters, T the trainable
  weights, B the model's `input_spec`, M the finalized model metrics):

    initialize: `( -> H@SERVER)`
    next: `(<H@SERVER, ModelWeights@CLIENTS, {B*}@CLIENTS> ->
           <state=H@SERVER,
            result=ClientResult<update=T, update_weight=float32>@CLIENTS,
            measurements=<train=M>@SERVER>)`
    get_hparams: `(H -> H)`; set_hparams: `(<H, H> -> H)`.

  Client weight: n (`NUM_EXAMPLES`) or 1 (`UNIFORM`); 0 for an empty dataset
  and, as TFF, for a non-finite update (zeroed, its metrics reset).

  Args:
    model_fn: No-arg callable returning a new
      `tff.learning.models.VariableModel`; for `'wsm'` its predictions must be
      logits [batch, num_classes] and its batches hold integer labels under
      `label_key` (mappings) or at index 1 (tuples).
    optimizer: The client `tff.learning.optimizers.Optimizer`.
    client_loss: `'ce'` or `'wsm'`.
    num_classes: The number of classes C >= 1; required for `'wsm'`.
    proximal_strength: mu >= 0; 0 disables the term.
    weight_decay: wd >= 0; 0 disables the term.
    sharpness: A `sharpness.Sharpness` (SAM or ASAM) or None (plain steps).
    fednova: A `fednova.FedNova`: the update is FedNova's `OrderedDict(
      normalized=(w_global - w) / a_i, steps=a_i)` (`fednova.
      normalized_update`; aggregate it with `fednova.FedNovaFactory`), not T.
    client_weighting: A `tff.learning.ClientWeighting`.
    metrics_aggregator: As in `build_model_delta_client_work`; default
      `tff.learning.metrics.sum_then_finalize`.
    label_key: The labels' key in mapping batches.
    loop_implementation: The loop over the batches, a form of
      `client_loop.LOOP_FORMS` (the same arithmetic either way); default
      TFF's `DATASET_REDUCE`, as `build_model_delta_client_work`.

  Returns:
    A `tff.learning.templates.ClientWorkProcess`.

  Raises:
    TypeError: If `client_weighting` is not a `tff.learning.ClientWeighting`,
      or (`'wsm'`) the labels are not integers or the batches hold other
      than dense tensors (`client_loop.hold`).
    ValueError: If `client_loss` is unknown, `num_classes` < 1 or missing for
      `'wsm'`, `proximal_strength` or `weight_decay` < 0, or
      `loop_implementation` is not a form of `client_loop.LOOP_FORMS`.
    KeyError: If (`'wsm'`) mapping batches have no `label_key`.
  """
  if not isinstance(client_weighting, tff.learning.ClientWeighting):
    raise TypeError(
        '`client_weighting` must be a tff.learning.ClientWeighting, got '
        f'{client_weighting!r}.'
    )
  client_training.check_client_loss(client_loss, num_classes)
  checks.check_number('proximal_strength', proximal_strength, minimum=0)
  checks.check_number('weight_decay', weight_decay, minimum=0)
  sharpness_lib.check_sharpness(sharpness)
  fednova_lib.check_fednova(fednova)
  loop_implementation = client_loop.client_loop(loop_implementation)
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize
  with tf.Graph().as_default():
    # A throwaway graph: the model's variables must not leak into the caller's.
    model = model_fn()
    if client_loss == 'wsm':
      # TypeError/KeyError naming the labels; the model is built only here.
      labels_lib.integer_label_spec(model.input_spec, label_key)
    metrics_aggregation_fn = metrics_aggregator(model.metric_finalizers())
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
  weights_type = tff.learning.models.weights_type_from_model(model)
  init_fn, get_hparams_fn, set_hparams_fn = _hparams_computations(optimizer)
  state_type = init_fn.type_signature.result.member

  @tff.tensorflow.computation(state_type, weights_type, data_type)
  def client_update_computation(state, initial_model_weights, dataset):
    client_update = _build_client_update(
        model_fn,
        optimizer,
        client_loss=client_loss,
        num_classes=num_classes,
        label_key=label_key,
        proximal_strength=float(proximal_strength),
        weight_decay=float(weight_decay),
        sharpness=sharpness,
        fednova=fednova,
        weighting=client_weighting,
        loop_implementation=loop_implementation,
    )
    return client_update(initial_model_weights, dataset, state)

  @tff.federated_computation(
      init_fn.type_signature.result,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, weights, client_data):
    client_result, model_outputs = tff.federated_map(
        client_update_computation,
        (tff.federated_broadcast(state), weights, client_data),
    )
    measurements = tff.federated_zip(
        collections.OrderedDict(train=metrics_aggregation_fn(model_outputs))
    )
    return tff.templates.MeasuredProcessOutput(
        state, client_result, measurements
    )

  return tff.learning.templates.ClientWorkProcess(
      init_fn,
      next_fn,
      get_hparams_fn=get_hparams_fn,
      set_hparams_fn=set_hparams_fn,
  )


def build_wsm_client_work(
    model_fn: ModelFn,
    optimizer: tff.learning.optimizers.Optimizer,
    *,
    num_classes: int,
    client_weighting: tff.learning.ClientWeighting = NUM_EXAMPLES,
    metrics_aggregator: Optional[Any] = None,
    label_key: str = labels_lib.DEFAULT_LABEL_KEY,
    proximal_strength: float = 0.0,
) -> tff.learning.templates.ClientWorkProcess:
  """`build_client_work` with `client_loss='wsm'` (docs/design.md sec. 2).

  Per client and round: beta_c = n_c / n over the client's dataset (one pass),
  then one `optimizer` step per batch b on

    L_b(w) = 1/|b| sum_{(x, y) in b} -log(beta_y e^{z_y} / sum_c beta_c e^{z_c})
             + (mu / 2) ||w - w_global||^2,

  z = f_w(x) the logits, mu = `proximal_strength` (WSM paper Eq. 4 up to a
  per-example constant, see `tff_fedwin.losses.wsm_cross_entropy`; FedProx
  Eq. 2). Classes with beta_c = 0 are masked out of the softmax (no NaN); the
  model's own loss only enters the reported metrics. Type signatures, client
  weights, arguments and errors: as `build_client_work`'s. At run time, a
  label outside [0, num_classes) fails the computation with the WSM error
  ("WSM labels are out of range ... num_classes = C").

  Returns:
    A `tff.learning.templates.ClientWorkProcess`.
  """
  return build_client_work(
      model_fn,
      optimizer,
      client_loss='wsm',
      num_classes=num_classes,
      proximal_strength=proximal_strength,
      client_weighting=client_weighting,
      metrics_aggregator=metrics_aggregator,
      label_key=label_key,
  )
