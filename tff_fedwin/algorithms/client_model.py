"""The model a client computation trains, built without random initial values.

A client computation builds its model (`model_fn()`) inside a
`tff.tensorflow.computation`, and TFF runs the graph's variable initializers on
every call, i.e. for every client of every round. The client then assigns the
broadcast global weights to every trainable variable before it reads one
(`client_training.build_client_training`'s `client_init`), so the initializers'
values are never used, yet a Keras model's random initializers (Glorot uniform
for `cnn_dropout`'s 1.2M weights) draw a Philox random number for each weight.
Measured 2026-11-27 (AVX2 machine, `perf record` of the TFF worker during
SCAFFOLD rounds of 10 clients x 1 step): 9.3% of the worker's samples were
Philox fills; one in-process graph drawing the model's shapes takes 5.1-5.6 ms
against 0.4 ms filling them with zeros (results/performance_history.md sec.
6.11).

`build_client_model` builds the model with every trainable variable whose
shape and dtype are known at creation started at zeros instead. Every other
variable keeps its own initial value: non-trainable ones include variables
outside the model's weights (metric counters), which no client assigns.
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff


def _zeros_for_trainable(next_creator: Callable[..., Any], **kwargs: Any):
  """A variable creator: zeros as a trainable variable's initial value."""
  shape = kwargs.get('shape')
  dtype = kwargs.get('dtype')
  if (
      kwargs.get('trainable') is True
      and shape is not None
      and tf.TensorShape(shape).is_fully_defined()
      and dtype is not None
  ):
    shape, dtype = tf.TensorShape(shape), tf.as_dtype(dtype)
    kwargs['initial_value'] = lambda: tf.zeros(shape, dtype)
  return next_creator(**kwargs)


def build_client_model(
    model_fn: Callable[[], tff.learning.models.VariableModel],
) -> tff.learning.models.VariableModel:
  """`model_fn()` with its trainable variables starting at zeros.

  Only for a model whose trainable weights are assigned (the broadcast
  global model) before they are read: a client's. Call it where the model's
  variables are created (inside the client's TFF computation).

  Args:
    model_fn: A no-arg callable returning a
      `tff.learning.models.VariableModel`.

  Returns:
    The model `model_fn` builds; the trainable variables created with a
    known shape and dtype (Keras layers pass both) start at zeros, every
    other variable at its own initial value.
  """
  with tf.variable_creator_scope(_zeros_for_trainable):
    return model_fn()
