"""A client in the worker: its model, its loop over its batches.

`client_loop` picks the loop form: `HELD_BATCHES` (the default; `hold` reads
the client dataset once into tensors, the steps run over those) or one of
TFF's `tff.learning.LoopImplementation`s. `train_client` runs a whole client
(init, the loop, final); `replayable` serves WSM's two reads in TFF's
forms (docs/design.md sec. 4.4, 7.4). `build_client_model` builds the client's
model without random initial values (docs/performance.md, 'The client loop and
the worker').
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.losses import labels as labels_lib

# Our loop form: the client's dataset is read once, with an iterator, into flat
# tensors (`hold`), and the steps run in a `tf.range` loop over slices of those,
# with no `tf.data` between steps (docs/performance.md, 'The client loop and the
# worker').
HELD_BATCHES = 'held_batches'
# Every loop form a client can run, ours first.
LOOP_FORMS = (HELD_BATCHES, *tff.learning.LoopImplementation)

LoopForm = Union[str, tff.learning.LoopImplementation]


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

  TFF runs a client computation's variable initializers for every client of
  every round, and a Keras model's random ones draw a Philox number per
  weight (docs/performance.md sec. 2.4). Only for a model whose trainable
  weights are assigned before they are read (`client_training`'s
  `client_init`); call it inside the client's TFF computation.

  Args:
    model_fn: A no-arg callable returning a
      `tff.learning.models.VariableModel`.

  Returns:
    The model `model_fn` builds; the trainable variables created with a
    known shape and dtype (Keras layers pass both) start at zeros, every
    other variable (metric counters included) at its own initial value.
  """
  with tf.variable_creator_scope(_zeros_for_trainable):
    return model_fn()


def client_loop(loop_implementation: Any) -> LoopForm:
  """The loop a client runs over its batches.

  `None` picks `HELD_BATCHES`, faster here than TFF's two forms
  (results/performance_history.md sec. 6.3). Every form is repeatable with both
  losses: WSM clients count their classes on the held pass or on a `replayable`
  copy of their dataset.

  Args:
    loop_implementation: `HELD_BATCHES`, a
      `tff.learning.LoopImplementation`, or `None`.

  Raises:
    ValueError: Naming `loop_implementation`, if it is none of these.
  """
  if loop_implementation is None:
    return HELD_BATCHES
  if isinstance(loop_implementation, tff.learning.LoopImplementation) or (
      isinstance(loop_implementation, str)
      and loop_implementation == HELD_BATCHES
  ):
    return loop_implementation
  allowed = ', '.join(
      [repr(HELD_BATCHES)]
      + [f'tff.learning.{l}' for l in tff.learning.LoopImplementation]
  )
  raise ValueError(
      f'`loop_implementation` must be one of {allowed} or None; got '
      f'{loop_implementation!r}.'
  )


class HeldBatches(NamedTuple):
  """A client's elements from one pass over its dataset, as flat tensors.

  Built by `hold` inside a `tf.function`. Component k of element i is
  `values[k][starts[k][i] : starts[k][i] + sizes[k][i]]` reshaped to
  `shapes[k][i]`.

  Attributes:
    element_spec: The dataset's `element_spec`.
    values: Per flat component, every element's values, flattened and
      concatenated in order.
    shapes: Per component, int64 [n, rank]: each element's shape.
    starts: Per component, int64 [n]: where each element starts in `values`.
    sizes: Per component, int64 [n]: each element's number of values.
  """

  element_spec: Any
  values: list[tf.Tensor]
  shapes: list[tf.Tensor]
  starts: list[tf.Tensor]
  sizes: list[tf.Tensor]

  @property
  def num_elements(self) -> tf.Tensor:
    """int64 scalar: the number of elements (batches) held."""
    if not self.shapes:
      return tf.constant(0, tf.int64)
    return tf.shape(self.shapes[0], out_type=tf.int64)[0]

  def element(self, index: tf.Tensor) -> Any:
    """Element `index` with the dataset's structure, dtypes and shapes."""
    flat = []
    for value, shape, start, size, spec in zip(
        self.values,
        self.shapes,
        self.starts,
        self.sizes,
        tf.nest.flatten(self.element_spec),
    ):
      tensor = tf.reshape(
          value[start[index] : start[index] + size[index]], shape[index]
      )
      tensor.set_shape(spec.shape)
      flat.append(tensor)
    return tf.nest.pack_sequence_as(self.element_spec, flat)

  def labels(self, label_key: str = labels_lib.DEFAULT_LABEL_KEY) -> tf.Tensor:
    """Every element's labels (`labels.batch_labels`), in one flat tensor."""
    flat_spec = tf.nest.flatten(self.element_spec)
    positions = tf.nest.pack_sequence_as(
        self.element_spec, list(range(len(flat_spec)))
    )
    return self.values[labels_lib.batch_labels(positions, label_key)]

  def as_dataset(self) -> tf.data.Dataset:
    """The held elements as a `tf.data.Dataset` (same spec and order)."""
    return tf.data.Dataset.range(self.num_elements).map(self.element)


def hold(dataset: tf.data.Dataset) -> HeldBatches:
  """Reads `dataset` once, with an iterator loop, into a `HeldBatches`.

  Call inside a `tf.function`. Holds one client's elements (all its epochs)
  in memory while it trains; elements of any rank and varying shapes (a
  short last batch) come back exactly.

  Args:
    dataset: A `tf.data.Dataset` whose elements are (nests of) dense tensors.

  Returns:
    A `HeldBatches` with `dataset.element_spec`.

  Raises:
    TypeError: If an element holds something other than dense tensors
      (ragged or sparse tensors, nested datasets).
  """
  specs = tf.nest.flatten(dataset.element_spec)
  for spec in specs:
    if type(spec) is not tf.TensorSpec:  # pylint: disable=unidiomatic-typecheck
      raise TypeError(
          'Client datasets must hold dense tensors (tf.TensorSpec) to be '
          f'held or replayed; got {spec!r}.'
      )
  values, shapes = _one_pass(dataset, specs)
  sizes = [tf.reduce_prod(s, axis=1) for s in shapes]
  return HeldBatches(
      element_spec=dataset.element_spec,
      values=values,
      shapes=shapes,
      starts=[tf.cumsum(z, exclusive=True) for z in sizes],
      sizes=sizes,
  )


def train_client(
    training: Any,
    initial_weights: tff.learning.models.ModelWeights,
    dataset: tf.data.Dataset,
    step_input: Any = (),
    optimizer_hparams: Any = None,
    loop_implementation: LoopForm = HELD_BATCHES,
    feature_state: Any = (),
) -> Any:
  """One client's training: `client_init`, the loop, `client_final`.

  Call inside a `tf.function`. The client reads `dataset` exactly once:
  held (`HELD_BATCHES`: the steps run in a `tf.range` loop over the held
  elements), replayed when WSM counts its classes before a TFF loop form
  (`replayable`), else directly; `DATASET_REDUCE` steps in `dataset.reduce`,
  `DATASET_ITERATOR` in a loop over `iter(dataset)`, as TFF's loop builder.

  Args:
    training: A `client_training.ClientTraining`.
    initial_weights: The received model, a `ModelWeights`.
    dataset: The client's batches.
    step_input: What the gradient transform reads (see `ClientStepState`).
    optimizer_hparams: The optimizer's hyperparameters, or `None`.
    loop_implementation: A form of `LOOP_FORMS` (see `client_loop`).
    feature_state: The feature step's initial state (FedFA), or `()`.

  Returns:
    The `client_training.ClientOutput`.
  """
  label_key = training.class_label_key  # None: no class proportions.
  class_data = batches = dataset
  if loop_implementation == HELD_BATCHES:
    batches = hold(dataset)
    if label_key is not None:
      class_data = batches.labels(label_key)
  elif label_key is not None:
    class_data = batches = replayable(dataset)
  step_state = training.client_init(
      initial_weights, class_data, step_input, optimizer_hparams, feature_state
  )
  if loop_implementation == HELD_BATCHES:
    for index in tf.range(batches.num_elements):
      step_state = training.client_step(step_state, batches.element(index))
  elif loop_implementation == tff.learning.LoopImplementation.DATASET_REDUCE:
    step_state = batches.reduce(step_state, training.client_step)
  else:
    for batch in iter(batches):
      step_state = training.client_step(step_state, batch)
  return training.client_final(initial_weights.trainable, step_state)


def replayable(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`hold(dataset).as_dataset()`: every pass reads the first pass's elements.

  Call inside a `tf.function`. For WSM's two reads in TFF's loop forms (class
  proportions, then training; docs/design.md sec. 4.4).
  """
  return hold(dataset).as_dataset()


def without_tf_data_rewrites(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`dataset` with tf.data's default graph rewrites and autotuning off.

  The same elements in the same order, without rewriting the whole graph and
  starting the autotuner once per client per round in the worker
  (docs/performance.md sec. 2.4).
  """
  options = tf.data.Options()
  options.experimental_optimization.apply_default_optimizations = False
  options.autotune.enabled = False
  return dataset.with_options(options)


def _one_pass(dataset, specs):
  """`([flat values], [shapes [n, rank]])` per component, one iterator pass."""
  values = [
      tf.TensorArray(
          s.dtype,
          size=0,
          dynamic_size=True,
          infer_shape=False,
          element_shape=tf.TensorShape([None]),
      )
      for s in specs
  ]
  shapes = [
      tf.TensorArray(
          tf.int64,
          size=0,
          dynamic_size=True,
          element_shape=tf.TensorShape([s.shape.rank]),
      )
      for s in specs
  ]
  index = tf.constant(0)
  for element in iter(without_tf_data_rewrites(dataset)):
    flat = tf.nest.flatten(element)
    values = [v.write(index, tf.reshape(t, [-1])) for v, t in zip(values, flat)]
    shapes = [
        s.write(index, tf.shape(t, out_type=tf.int64))
        for s, t in zip(shapes, flat)
    ]
    index += 1
  return [v.concat() for v in values], [s.stack() for s in shapes]
