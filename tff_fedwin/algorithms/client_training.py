"""One client's local training in FedJAX's shape: init, step, final.

`build_client_training` returns three small `tf.function`s on one model:
`client_init` loads the received weights (and counts the class proportions
for the WSM loss), `client_step` takes one gradient step on a batch and
`client_final` reads out the model delta and the counters (docs/design.md
sec. 4.4). The step takes the batch loss's gradient (with FedFA's feature
term), at SAM/ASAM's ascent, minus MIME's start gradient, plus weight decay,
through the gradient transform, then one optimizer step: the variants differ
only in what they plug in.
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin.algorithms import reference_gradient
from tff_fedwin.algorithms import sharpness as sharpness_lib
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.losses import labels as labels_lib
from tff_fedwin.losses import wsm

CLIENT_LOSSES = choices.CLIENT_LOSSES


class ClientStepState(NamedTuple):
  """What the loop over a client's batches carries (FedJAX's step state).

  Attributes:
    optimizer_state: The optimizer step's state (`()` for plain SGD).
    step_input: What the gradient transform reads, constant over the loop
      (w_global for FedProx, c - c_i for SCAFFOLD; `()` without), flat as a
      tuple (docs/design.md sec. 4.4).
    class_proportions: beta, float32 [num_classes], for `'wsm'`; `()` for
      `'ce'`.
    num_examples: int64, examples processed.
    num_steps: int64, batches processed (K).
    loss_sum: float32, sum over batches of the model's own batch loss times
      the batch size (0 if the model reports no loss).
    start_trainable: The client's start weights, flat, with
      `subtract_start_gradient` (MIME); `()` without.
    feature_state: The `feature_step`'s state (FedFA); `()` without.
  """

  optimizer_state: Any
  step_input: Any
  class_proportions: Any
  num_examples: Any
  num_steps: Any
  loss_sum: Any
  start_trainable: Any = ()
  feature_state: Any = ()


class ClientOutput(NamedTuple):
  """What `client_final` reads out.

  Attributes:
    model_delta: w_global - w_trained on the trainable weights (TFF's sign).
    all_finite: bool scalar, whether every entry of `model_delta` is finite.
    num_examples, num_steps, loss_sum, feature_state: `ClientStepState`'s,
      after the loop.
  """

  model_delta: Any
  all_finite: Any
  num_examples: Any
  num_steps: Any
  loss_sum: Any
  feature_state: Any = ()


class ClientTraining(NamedTuple):
  """The parts returned by `build_client_training` (see there).

  `class_label_key` is the labels' key when `client_init` counts class
  proportions (`'wsm'`), else `None`. `batch_gradient(step_state, batch)`
  is `(gradients, batch size)` of the training loss at the model's weights
  (before weight decay and the transform; MIME's full gradient).
  """

  model: tff.learning.models.VariableModel
  model_weights: tff.learning.models.ModelWeights
  client_init: Callable[..., ClientStepState]
  client_step: Callable[[ClientStepState, Any], ClientStepState]
  client_final: Callable[[Any, ClientStepState], ClientOutput]
  class_label_key: Optional[str]
  batch_gradient: Callable[[ClientStepState, Any], tuple[Any, Any]]


def zero_all_if_any_non_finite(structure: Any, all_finite: Any) -> Any:
  """`structure` if `all_finite`, else zeros of its shape (TFF's rule)."""
  return tf.nest.map_structure(
      lambda t: tf.where(all_finite, t, tf.zeros_like(t)), structure
  )


def _all_finite(structure: Any) -> tf.Tensor:
  finite = [
      tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure)
  ]
  return tf.reduce_all([tf.constant(True)] + finite)


def check_client_loss(client_loss: Any, num_classes: Any) -> None:
  """Raises ValueError naming `client_loss` or `num_classes` if bad."""
  checks.check_choice('client_loss', client_loss, CLIENT_LOSSES)
  if client_loss == 'wsm' and num_classes is None:
    raise ValueError(
        "`num_classes` is required with client_loss='wsm' (the length of the "
        'class proportions beta).'
    )
  if client_loss == 'wsm':
    checks.check_int('num_classes', num_classes, minimum=1)


def _build_client_init(
    model_weights, optimizer_step, *, num_classes, label_key, keep_start
):
  """`client_init`; counts class proportions iff `num_classes` is set; keeps
  the start weights iff `keep_start`."""

  @tf.function
  def client_init(
      initial_weights,
      dataset,
      step_input=(),
      optimizer_hparams=None,
      feature_state=(),
  ):
    tf.nest.map_structure(
        lambda v, t: v.assign(t), model_weights, initial_weights
    )
    class_proportions = ()
    if isinstance(dataset, tf.data.Dataset) and num_classes is not None:
      class_proportions = wsm.class_proportions_from_dataset(
          dataset, num_classes, label_key
      )
    elif num_classes is not None:  # A tensor of all the labels.
      class_proportions = wsm.class_proportions_from_labels(
          dataset, num_classes
      )
    specs = tuple(
        tf.TensorSpec(v.shape, v.dtype)
        for v in tf.nest.flatten(model_weights.trainable)
    )
    return ClientStepState(
        optimizer_state=optimizer_step.initialize(specs, optimizer_hparams),
        step_input=tuple(tf.nest.flatten(step_input)),
        class_proportions=class_proportions,
        num_examples=tf.constant(0, tf.int64),
        num_steps=tf.constant(0, tf.int64),
        loss_sum=tf.constant(0.0, tf.float32),
        start_trainable=(
            tuple(tf.nest.flatten(initial_weights.trainable))
            if keep_start
            else ()
        ),
        feature_state=feature_state,
    )

  return client_init


def batch_size(output: Any) -> tf.Tensor:
  """`output.num_examples`, else the predictions' batch dimension (int64)."""
  if output.num_examples is None:
    return tf.shape(output.predictions, out_type=tf.int64)[0]
  return tf.cast(output.num_examples, tf.int64)


def _batch_loss_fn(client_loss: str, label_key: str) -> Callable[..., Any]:
  """`(output, batch, class_proportions) -> loss`: the training batch loss."""

  def model_loss(output, batch, class_proportions):
    del batch, class_proportions  # Unused.
    return output.loss

  def wsm_loss(output, batch, class_proportions):
    return tf.reduce_mean(
        wsm.wsm_cross_entropy(
            labels_lib.batch_labels(batch, label_key),
            output.predictions,
            class_proportions,
        )
    )

  return wsm_loss if client_loss == 'wsm' else model_loss


def _batch_gradient(
    model, trainable, batch_loss, batch, class_proportions, feature_loss=None
):
  """`(output, gradients, features)` of the batch loss at the model's weights.

  `feature_loss`: `batch -> (output, features, term)`, FedFA's forward pass,
  its term added to the loss; `features` is `()` without. A gradient the tape
  does not produce is 0.
  """
  features = ()
  with tf.GradientTape() as tape:
    if feature_loss is None:
      output = model.forward_pass(batch, training=True)
    else:
      output, features, term = feature_loss(batch)
    loss = batch_loss(output, batch, class_proportions)
    if feature_loss is not None:
      loss += tf.cast(term, loss.dtype)
  gradients = tape.gradient(loss, trainable)
  gradients = tf.nest.map_structure(
      lambda g, v: tf.zeros_like(v) if g is None else g, gradients, trainable
  )
  return output, gradients, features


def _build_client_step(
    model,
    trainable,
    optimizer_step,
    *,
    batch_loss,
    gradient_transform,
    weight_decay,
    sharpness,
    subtract_start_gradient,
    feature_step,
    label_key,
):
  """`client_step`: one optimizer step on the batch's (transformed) gradient."""

  @tf.function
  def client_step(step_state, batch):
    proportions = step_state.class_proportions

    def gradient_at():
      output, gradients, _ = _batch_gradient(
          model, trainable, batch_loss, batch, proportions
      )
      return output, gradients

    feature_loss = labels = None
    if feature_step is not None:
      labels = labels_lib.batch_labels(batch, label_key)
      feature_loss = step_hooks.feature_loss_fn(
          model, feature_step, step_state.feature_state, labels
      )
    output, gradients, features = _batch_gradient(
        model, trainable, batch_loss, batch, proportions, feature_loss
    )
    if sharpness is not None:
      gradients = sharpness_lib.perturbed_gradient(
          sharpness, model, trainable, gradients, gradient_at
      )
    if subtract_start_gradient:
      start = tf.nest.pack_sequence_as(trainable, step_state.start_trainable)
      at_start = reference_gradient.gradient_at_weights(
          model, trainable, start, gradient_at
      )
      gradients = tf.nest.map_structure(tf.subtract, gradients, at_start)
    gradients = step_hooks.weight_decay_gradient(
        gradients, trainable, weight_decay
    )
    if gradient_transform is not None:
      step_input = tf.nest.pack_sequence_as(trainable, step_state.step_input)
      gradients = gradient_transform(gradients, trainable, step_input)
    optimizer_state, new_trainable = optimizer_step.next(
        step_state.optimizer_state,
        tuple(tf.nest.flatten(trainable)),
        tuple(tf.nest.flatten(gradients)),
    )
    for variable, value in zip(tf.nest.flatten(trainable), new_trainable):
      variable.assign(value)
    feature_state = step_state.feature_state
    if feature_step is not None:
      feature_state = feature_step.after_step(
          feature_state, model, features, labels
      )
    examples = batch_size(output)
    loss_sum = step_state.loss_sum
    if output.loss is not None:
      loss_sum += tf.cast(output.loss, tf.float32) * tf.cast(
          examples, tf.float32
      )
    return step_state._replace(
        optimizer_state=optimizer_state,
        num_examples=step_state.num_examples + examples,
        num_steps=step_state.num_steps + 1,
        loss_sum=loss_sum,
        feature_state=feature_state,
    )

  return client_step


def _build_client_final(trainable):
  """`client_final`: the delta `initial - trained` and the counters."""

  @tf.function
  def client_final(initial_trainable, step_state):
    model_delta = tf.nest.map_structure(
        tf.subtract, initial_trainable, trainable
    )
    return ClientOutput(
        model_delta=model_delta,
        all_finite=_all_finite(model_delta),
        num_examples=step_state.num_examples,
        num_steps=step_state.num_steps,
        loss_sum=step_state.loss_sum,
        feature_state=step_state.feature_state,
    )

  return client_final


def build_client_training(
    model: tff.learning.models.VariableModel,
    *,
    optimizer_step: step_hooks.OptimizerStep,
    client_loss: str = 'ce',
    num_classes: Optional[int] = None,
    label_key: str = labels_lib.DEFAULT_LABEL_KEY,
    gradient_transform: Optional[step_hooks.GradientTransform] = None,
    weight_decay: float = 0.0,
    sharpness: Optional[sharpness_lib.Sharpness] = None,
    subtract_start_gradient: bool = False,
    feature_step: Optional[step_hooks.FeatureStep] = None,
) -> ClientTraining:
  """Builds `client_init`, `client_step` and `client_final` on `model`.

  Call inside the graph that runs them (a `tff.tensorflow.computation`), or
  eagerly in tests; `client_loop.train_client` runs the three over a client's
  dataset (docs/design.md sec. 4.4). With w the trainable weights, each
  batch b takes one step of `optimizer_step` with the gradient

    g = transform(grad_w L_b(w) + wd * w, w, step_input),

  grad_w L_b(w + e) in place of grad_w L_b(w) with `sharpness` (e SAM's or
  ASAM's ascent, docs/design.md sec. 4.6); L_b the model's own loss for
  `'ce'`, the batch mean of `tff_fedwin.losses.wsm_cross_entropy(labels,
  logits, beta)` for `'wsm'` (docs/design.md sec. 2), beta the client's
  class proportions.

  * `client_init(initial_weights, dataset, step_input=(),
    optimizer_hparams=None, feature_state=()) -> ClientStepState`;
    `dataset` a `tf.data.Dataset` or a tensor of all the client's labels.
  * `client_step(step_state, batch) -> ClientStepState`.
  * `client_final(initial_trainable, step_state) -> ClientOutput`.

  Args:
    model: A `tff.learning.models.VariableModel`; for `'wsm'` its
      predictions must be logits [batch, num_classes].
    optimizer_step: An `step_hooks.OptimizerStep`.
    client_loss: One of `CLIENT_LOSSES`.
    num_classes: The number of classes C >= 1; required for `'wsm'`.
    label_key: The labels' key in mapping batches (else `batch[1]`).
    gradient_transform: A `GradientTransform`, or None: the plain gradient.
    weight_decay: wd >= 0 (`step_hooks.weight_decay_gradient`).
    sharpness: A `sharpness.Sharpness` (SAM or ASAM), or None.
    subtract_start_gradient: Whether the batch gradient at the client's start
      weights is subtracted before weight decay and the transform (MIME's
      g(y; b) - g(x; b)).
    feature_step: A `step_hooks.FeatureStep` (FedFA; `model` a
      `FeatureModel`): its loss term joins the batch loss, its `after_step`
      follows each step, its state starts at `client_init`'s `feature_state`.

  Returns:
    A `ClientTraining`.

  Raises:
    ValueError: If `client_loss` is not one of `CLIENT_LOSSES`, or `'wsm'`
      lacks an integer `num_classes` >= 1, or `weight_decay` < 0, or more
      than one of `sharpness`, `subtract_start_gradient` and `feature_step`
      is given.
  """
  check_client_loss(client_loss, num_classes)
  checks.check_number('weight_decay', weight_decay, minimum=0)
  sharpness_lib.check_sharpness(sharpness)
  if sum(map(bool, (sharpness, subtract_start_gradient, feature_step))) > 1:
    raise ValueError(
        '`sharpness`, `subtract_start_gradient` and `feature_step` exclude '
        'each other.'
    )
  model_weights = tff.learning.models.ModelWeights.from_model(model)
  trainable = model_weights.trainable
  num_classes = num_classes if client_loss == 'wsm' else None
  batch_loss = _batch_loss_fn(client_loss, label_key)

  def batch_gradient(step_state, batch):
    output, gradients, _ = _batch_gradient(
        model, trainable, batch_loss, batch, step_state.class_proportions
    )
    return gradients, batch_size(output)

  return ClientTraining(
      model=model,
      model_weights=model_weights,
      client_init=_build_client_init(
          model_weights,
          optimizer_step,
          num_classes=num_classes,
          label_key=label_key,
          keep_start=subtract_start_gradient,
      ),
      client_step=_build_client_step(
          model,
          trainable,
          optimizer_step,
          batch_loss=batch_loss,
          gradient_transform=gradient_transform,
          weight_decay=float(weight_decay),
          sharpness=sharpness,
          subtract_start_gradient=subtract_start_gradient,
          feature_step=feature_step,
          label_key=label_key,
      ),
      client_final=_build_client_final(trainable),
      class_label_key=label_key if num_classes is not None else None,
      batch_gradient=batch_gradient,
  )
