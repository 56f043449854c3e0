"""Where a batch keeps its labels: `batch[label_key]`, or `batch[1]`.

The one label lookup shared by the WSM loss and the client training: batches
(and `element_spec`s) are mappings holding the labels under `label_key`, or
`(x, y)` tuples holding them at index 1.
"""

import collections.abc
from typing import Any

import tensorflow as tf

DEFAULT_LABEL_KEY = 'y'


def batch_labels(batch: Any, label_key: str = DEFAULT_LABEL_KEY) -> Any:
  """The labels of a batch (or spec): `batch[label_key]`, else `batch[1]`."""
  if isinstance(batch, collections.abc.Mapping):
    return batch[label_key]
  return batch[1]


def integer_label_spec(
    element_spec: Any, label_key: str = DEFAULT_LABEL_KEY
) -> tf.TensorSpec:
  """The `tf.TensorSpec` of the labels in `element_spec`, checked.

  Args:
    element_spec: A dataset's `element_spec` or a model's `input_spec`:
      a mapping with the labels under `label_key`, or a tuple/list `(x, y)`.
    label_key: The labels' key for mapping specs.

  Returns:
    The labels' `tf.TensorSpec`.

  Raises:
    KeyError: If a mapping spec has no `label_key`.
    TypeError: If the spec is neither a mapping nor a tuple/list of length
      >= 2, or the labels are not integers.
  """
  if isinstance(element_spec, collections.abc.Mapping):
    if label_key not in element_spec:
      raise KeyError(
          f'Dataset elements have no label key {label_key!r}; keys: '
          f'{sorted(element_spec)}.'
      )
  elif not (isinstance(element_spec, (tuple, list)) and len(element_spec) >= 2):
    raise TypeError(
        'Dataset elements must be mappings with the labels under '
        f'{label_key!r} or (x, y) tuples; got element_spec {element_spec}.'
    )
  spec = batch_labels(element_spec, label_key)
  if not (isinstance(spec, tf.TensorSpec) and spec.dtype.is_integer):
    raise TypeError(f'Labels must be integers; got {spec}.')
  return spec
