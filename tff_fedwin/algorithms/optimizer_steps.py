"""How a client step moves the weights: TFF's optimizers or plain SGD.

`client_training.build_client_training` takes one `OptimizerStep`:
`tff_optimizer_step` for the model-delta clients (TFF's SGD(M) with the
client schedule's rate), `sgd_step` for the client-state family's.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff


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
