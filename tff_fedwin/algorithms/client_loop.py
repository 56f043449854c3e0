"""The client's loop over its batches: which form, running it, reading twice.

`client_loop` picks TFF's loop form (`tff.learning.LoopImplementation`);
`run_client_loop` runs a `client_training` step over a dataset in that form;
`replayable` turns one pass over a client dataset into a dataset that reads
the same elements on every pass, for WSM's two passes (docs/design.md
sec. 4.4).
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff


def client_loop(loop_implementation: Any) -> tff.learning.LoopImplementation:
  """The loop a client runs over its batches.

  `None` picks `DATASET_ITERATOR`, faster here than TFF's default
  `DATASET_REDUCE` (docs/design.md sec. 7.4). Both are repeatable with both
  losses: WSM clients read a `replayable` copy of their dataset.

  Args:
    loop_implementation: A `tff.learning.LoopImplementation`, or `None`.

  Raises:
    ValueError: Naming `loop_implementation`, if it is not a
      `tff.learning.LoopImplementation` or `None`.
  """
  loops = tff.learning.LoopImplementation
  if loop_implementation is None:
    return loops.DATASET_ITERATOR
  if not isinstance(loop_implementation, loops):
    allowed = ', '.join(
        f'tff.learning.LoopImplementation.{l.name}' for l in loops
    )
    raise ValueError(
        f'`loop_implementation` must be one of {allowed} or None; got '
        f'{loop_implementation!r}.'
    )
  return loop_implementation


def run_client_loop(
    client_step: Callable[[Any, Any], Any],
    step_state: Any,
    dataset: tf.data.Dataset,
    loop_implementation: tff.learning.LoopImplementation = (
        tff.learning.LoopImplementation.DATASET_REDUCE
    ),
) -> Any:
  """Runs `client_step` over the batches of `dataset`, in order.

  Call inside a `tf.function`. `DATASET_REDUCE` uses `dataset.reduce`,
  `DATASET_ITERATOR` a loop over `iter(dataset)` (as TFF's loop builder).
  """
  if loop_implementation == tff.learning.LoopImplementation.DATASET_REDUCE:
    return dataset.reduce(step_state, client_step)
  for batch in iter(dataset):
    step_state = client_step(step_state, batch)
  return step_state


def replayable(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`dataset`'s elements from one pass, held in memory, as a new dataset.

  Call inside a `tf.function`. `dataset` is iterated exactly once (an
  iterator loop, as `DATASET_ITERATOR`); every pass over the result reads
  the same elements in the same order, without re-running `dataset`'s
  shuffle. WSM reads its client dataset twice (class proportions, then
  training); a second pass over a shuffled dataset reshuffles with a seed
  that depended on what the TFF worker had run before (docs/design.md
  sec. 4.4), one pass does not. Holds one client's elements (all its epochs)
  in memory while the client trains.

  Each element's tensors are kept flat, with their shapes, so elements of
  any rank and varying shapes (a short last batch) replay exactly.

  Args:
    dataset: A `tf.data.Dataset` whose elements are (nests of) dense tensors.

  Returns:
    A `tf.data.Dataset` with `dataset.element_spec` and the same elements.

  Raises:
    TypeError: If an element holds something other than dense tensors
      (ragged or sparse tensors, nested datasets).
  """
  specs = tf.nest.flatten(dataset.element_spec)
  for spec in specs:
    if type(spec) is not tf.TensorSpec:  # pylint: disable=unidiomatic-typecheck
      raise TypeError(
          'WSM client datasets must hold dense tensors (tf.TensorSpec); got '
          f'{spec!r}.'
      )
  values, shapes = _one_pass(dataset, specs)
  sizes = [tf.reduce_prod(s, axis=1) for s in shapes]
  starts = [tf.cumsum(z, exclusive=True) for z in sizes]

  def element(index):
    flat = []
    for value, shape, start, size, spec in zip(
        values, shapes, starts, sizes, specs
    ):
      tensor = tf.reshape(
          value[start[index] : start[index] + size[index]], shape[index]
      )
      tensor.set_shape(spec.shape)
      flat.append(tensor)
    return tf.nest.pack_sequence_as(dataset.element_spec, flat)

  num_elements = tf.shape(shapes[0], out_type=tf.int64)[0] if shapes else 0
  return tf.data.Dataset.range(num_elements).map(element)


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
  for element in iter(dataset):
    flat = tf.nest.flatten(element)
    values = [v.write(index, tf.reshape(t, [-1])) for v, t in zip(values, flat)]
    shapes = [
        s.write(index, tf.shape(t, out_type=tf.int64))
        for s, t in zip(shapes, flat)
    ]
    index += 1
  return [v.concat() for v in values], [s.stack() for s in shapes]
