"""The client's loop over its batches: which form, and running it.

`client_loop` picks TFF's loop form (`tff.learning.LoopImplementation`) for a
client loss and refuses the one that is not repeatable with it;
`run_client_loop` runs a `client_training` step over a dataset in that form
(docs/design.md sec. 4.4).
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff


def client_loop(
    loop_implementation: Any, client_loss: str
) -> tff.learning.LoopImplementation:
  """The loop a client runs over its batches, checked against its loss.

  `None` picks `DATASET_ITERATOR` for `'ce'` (one pass over the dataset,
  faster here) and `DATASET_REDUCE` for `'wsm'`. WSM reads the dataset twice
  (class proportions, then training); with the iterator loop, the training
  pass's shuffle order then depended on what the TFF worker had run before
  (TensorFlow's reshuffling seed generator keeps its state in the worker), so
  a run resumed on a new worker differed from an uninterrupted one
  (docs/design.md sec. 4.4).

  Args:
    loop_implementation: A `tff.learning.LoopImplementation`, or `None`.
    client_loss: One of `CLIENT_LOSSES`.

  Raises:
    ValueError: Naming `loop_implementation`, if it is not a
      `tff.learning.LoopImplementation` or is `DATASET_ITERATOR` with `'wsm'`.
  """
  loops = tff.learning.LoopImplementation
  if loop_implementation is None:
    return (
        loops.DATASET_REDUCE if client_loss == 'wsm' else loops.DATASET_ITERATOR
    )
  if not isinstance(loop_implementation, loops):
    allowed = ', '.join(
        f'tff.learning.LoopImplementation.{l.name}' for l in loops
    )
    raise ValueError(
        f'`loop_implementation` must be one of {allowed} or None; got '
        f'{loop_implementation!r}.'
    )
  if client_loss == 'wsm' and loop_implementation == loops.DATASET_ITERATOR:
    raise ValueError(
        '`loop_implementation` DATASET_ITERATOR is not allowed with '
        "client_loss='wsm': its second pass over a shuffled dataset depends "
        'on what the TFF worker ran before; use DATASET_REDUCE (or None).'
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
