"""The window after the server optimizer, as a TFF finalizer (WiMA Eq. 7).

`build_window_finalizer` applies the server optimizer, then pushes the new
global model to a `WindowBuffer`, so the window holds the post-optimizer models
for any server optimizer (docs/design.md sec. 1).
"""

import collections
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators.window_state import WindowBuffer


class WindowFinalizerState(NamedTuple):
  """State of the window finalizer.

  Attributes:
    optimizer: The state of TFF's apply-optimizer finalizer.
    window: A `tff_fedwin.aggregators.WindowBuffer` of the absolute
      post-optimizer trainable weights.
  """

  optimizer: Any
  window: WindowBuffer


def build_window_finalizer(
    optimizer: tff.learning.optimizers.Optimizer,
    model_weights_type: tff.Type,
    *,
    window_size: int,
    mode: str = 'evaluate',
    start_round: int = 0,
    read_every: int = 1,
) -> tff.learning.templates.FinalizerProcess:
  """A finalizer applying `optimizer`, then pushing the new model to the window.

  Type signatures:
    initialize: `( -> WindowFinalizerState@SERVER)`
    next: `(<WindowFinalizerState@SERVER, ModelWeights@SERVER, U@SERVER> ->
           <state=WindowFinalizerState@SERVER, result=ModelWeights@SERVER,
            measurements=M@SERVER>)`

  `result` is the post-optimizer model w^t, or in `'broadcast'` mode at active
  rounds the window model m^t (IMA), which the clients start from next round.
  The window holds w^t in both modes.

  Args:
    optimizer: The server `tff.learning.optimizers.Optimizer`.
    model_weights_type: The `tff.learning.models.ModelWeights` type.
    window_size: W >= 1.
    mode: `'evaluate'` (WiMA) or `'broadcast'` (IMA).
    start_round: Active from round max(W, start_round).
    read_every: E: the window model is exact at rounds t % E == 0; the state
      keeps ceil(W/E) slots (1 in `'broadcast'` mode).
  """
  window_args = dict(
      window_size=window_size,
      mode=mode,
      start_round=start_round,
      read_every=read_every,
  )
  window_math.check_window_args(**window_args)
  window_math.check_float_structure(
      model_weights_type.trainable, 'model trainable weights'
  )
  inner = tff.learning.templates.build_apply_optimizer_finalizer(
      optimizer, model_weights_type
  )
  trainable_specs = tff.types.type_to_tf_tensor_specs(
      model_weights_type.trainable
  )

  @tff.tensorflow.computation
  def init_window_fn():
    zeros = tf.nest.map_structure(
        lambda spec: tf.zeros(spec.shape, spec.dtype), trainable_specs
    )
    return window_math.initial_window(zeros, **window_args)

  window_type = init_window_fn.type_signature.result

  window_step_fn = tff.tensorflow.computation(
      window_math.window_step, window_type, model_weights_type
  )

  @tff.federated_computation()
  def init_fn():
    return tff.federated_zip(
        WindowFinalizerState(
            inner.initialize(), tff.federated_eval(init_window_fn, tff.SERVER)
        )
    )

  return tff.learning.templates.FinalizerProcess(
      init_fn,
      _build_next_fn(inner, window_step_fn, init_fn.type_signature.result),
  )


def _build_next_fn(inner, window_step_fn, state_type):
  """The `next` computation: the optimizer step, then the window step."""

  @tff.federated_computation(
      state_type,
      inner.next.type_signature.parameter[1],
      inner.next.type_signature.parameter[2],
  )
  def next_fn(state, weights, update):
    # Server optimizer step.
    inner_output = inner.next(state.optimizer, weights, update)
    # Window of the post-optimizer models.
    window, new_weights, window_measures = tff.federated_map(
        window_step_fn, (state.window, inner_output.result)
    )
    # Output preparation.
    return tff.templates.MeasuredProcessOutput(
        state=tff.federated_zip(
            WindowFinalizerState(inner_output.state, window)
        ),
        result=new_weights,
        measurements=tff.federated_zip(
            collections.OrderedDict(
                optimizer=inner_output.measurements, window=window_measures
            )
        ),
    )

  return next_fn
