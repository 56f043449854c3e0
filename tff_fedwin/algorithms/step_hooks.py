"""The hooks of a client step: gradient transform, optimizer step, feature step.

`client_training.build_client_training` takes the plain batch gradient g,
adds weight decay (`weight_decay_gradient`, g + wd w), applies one
`GradientTransform`, `(g, w, step_input) -> g'`, with `step_input` constant
over the client's loop (`proximal_gradient`, FedProx; `control_variate_
correction`, SCAFFOLD), and moves the weights with one `OptimizerStep`
(`tff_optimizer_step` for the model-delta clients, `sgd_step` for the
client-state family's); FedFA's clients add a `FeatureStep` (docs/design.md
sec. 4.4, 4.10).
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import tensorflow as tf
import tensorflow_federated as tff

# (gradients, trainable weights, step_input) -> gradients.
GradientTransform = Callable[[Any, Any, Any], Any]


def proximal_gradient(proximal_strength: float) -> GradientTransform:
  """`g + mu (w - w_global)`: adds the gradient of (mu/2)||w - w_global||^2.

  The FedProx term (Li et al. 2020, Eq. 2); `step_input` is w_global's
  trainable weights.

  Args:
    proximal_strength: mu >= 0.

  Returns:
    A `GradientTransform`.
  """

  def transform(gradients, trainable, initial_trainable):
    return tf.nest.map_structure(
        lambda g, v, v0: g
        + tf.cast(proximal_strength, v.dtype) * (v - tf.cast(v0, v.dtype)),
        gradients,
        trainable,
        initial_trainable,
    )

  return transform


def control_variate_correction(gradients, trainable, correction):
  """`g + (c - c_i)`: SCAFFOLD's corrected gradient (Alg. 1, line 10).

  A `GradientTransform` whose `step_input` is the correction c - c_i.
  """
  del trainable  # Unused.
  return tf.nest.map_structure(tf.add, gradients, correction)


def weight_decay_gradient(gradients: Any, trainable: Any, weight_decay: float):
  """`g + wd * w`: the L2 term (wd/2)||w||^2 added to a gradient.

  As PyTorch's `torch.optim.SGD(weight_decay=wd)` applies it: to the raw
  gradient, before momentum and any correction (docs/design.md sec. 4.4).
  `weight_decay` 0 returns `gradients` unchanged (no op in the graph).
  """
  if not weight_decay:
    return gradients
  return tf.nest.map_structure(
      lambda g, v: g + tf.cast(weight_decay, v.dtype) * v, gradients, trainable
  )


class OptimizerStep(NamedTuple):
  """How `client_step` moves the weights given the (transformed) gradients.

  Attributes:
    initialize: `(trainable_specs, hparams) -> optimizer_state`, with
      `trainable_specs` a tuple of `tf.TensorSpec`s and `hparams` the
      optimizer's hyperparameters or `None`.
    next: `(optimizer_state, trainable, gradients) -> (optimizer_state,
      new_trainable)` on tuples of tensors (variables are read).
  """

  initialize: Callable[[Any, Any], Any]
  next: Callable[[Any, Any, Any], tuple[Any, Any]]


def tff_optimizer_step(
    optimizer: tff.learning.optimizers.Optimizer,
) -> OptimizerStep:
  """A step of a `tff.learning.optimizers.Optimizer` (model-delta clients)."""

  def initialize(trainable_specs, hparams):
    state = optimizer.initialize(trainable_specs)
    if hparams is not None:
      state = optimizer.set_hparams(state, hparams)
    return state

  return OptimizerStep(initialize=initialize, next=optimizer.next)


def sgd_step(learning_rate: float) -> OptimizerStep:
  """Plain SGD without momentum: `w <- w - lr * g` (the client-state family's).

  The rate is `learning_rate`, or the round's `hparams['learning_rate']`
  when the client passes one (a client learning-rate schedule): the
  optimizer state is then that rate, a float32 scalar; else it is `()`.
  """

  def initialize(specs, hparams):
    del specs  # Unused.
    if hparams is None:
      return ()
    return tf.cast(hparams['learning_rate'], tf.float32)

  def next_fn(state, trainable, gradients):
    rate = learning_rate if isinstance(state, tuple) else state
    new_trainable = tuple(
        w - tf.cast(rate, w.dtype) * g for w, g in zip(trainable, gradients)
    )
    return state, new_trainable

  return OptimizerStep(initialize=initialize, next=next_fn)


@runtime_checkable
class HasFeatures(Protocol):
  """A `tff.learning.models.VariableModel` whose logits are h(phi(x))."""

  def features(self, x: Any, training: bool = True) -> tf.Tensor:
    """phi(x), the feature extractor's output."""

  def classify(self, features: tf.Tensor) -> tf.Tensor:
    """h(features), the logits."""

  @property
  def classifier_variables(self) -> list[tf.Variable]:
    """h's trainable variables."""

  def forward_pass_with_features(
      self, batch_input: Any, training: bool = True
  ) -> tuple[Any, tf.Tensor]:
    """`(forward_pass(batch_input), phi(x))` of one pass."""


class FeatureStep(NamedTuple):
  """How a client step uses the features (all TF, traced in the step).

  FedFA's (docs/design.md sec. 4.10), on a `HasFeatures` model (e.g.
  `tff_fedwin.tasks.feature_model.FeatureModel`); its state rides in
  `ClientStepState.feature_state` and comes out in `ClientOutput`.

  Attributes:
    initial_state: `(server_vector, round_num, model) -> state`, before the
      client's loop: what `loss` and `after_step` read and update; round_num
      the rounds completed (int64).
    loss: `(features, labels, state) -> float32 scalar`, added to the batch's
      training loss (its gradient reaches the feature extractor).
    after_step: `(state, model, features, labels) -> state`, after the
      optimizer step, with the batch's features before it.
    sent_vector: `(state, server_vector, num_examples) -> vector`, after the
      loop: the vector the client sends (summed over the round's clients).
  """

  initial_state: Callable[[Any, Any, Any], Any]
  loss: Callable[[Any, Any, Any], Any]
  after_step: Callable[[Any, Any, Any, Any], Any]
  sent_vector: Callable[[Any, Any, Any], Any]


def feature_loss_fn(model, feature_step, state, labels):
  """`batch -> (output, features, term)`: the model's forward pass and phi(x)
  of one pass (`model.forward_pass_with_features`; phi(x) flattened to
  [batch, d]) and `feature_step.loss` of them, for the client step's tape."""

  def feature_loss(batch):
    output, features = model.forward_pass_with_features(batch, training=True)
    features = tf.reshape(features, [tf.shape(features)[0], -1])
    return output, features, feature_step.loss(features, labels, state)

  return feature_loss
