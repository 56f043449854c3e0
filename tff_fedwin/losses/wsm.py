"""The re-weighted softmax (WSM) cross-entropy (docs/design.md sec. 2).

`wsm_cross_entropy` is the per-example client training loss of Legate et al.,
Eq. 4 (up to a per-example constant); `class_proportions_from_dataset` (over
a dataset) and `class_proportions_from_labels` (over a tensor of labels)
count the client's class proportions beta it needs. Evaluation uses plain
cross-entropy.
"""

from typing import Union

import tensorflow as tf

from tff_fedwin.losses import labels as labels_lib

# Stands in for log(0) = -inf for classes absent from a client. Shifted logits
# of masked classes are then about 1e9 below those of present classes (for
# |logits| << 1e9), so their softmax weight, and with it their gradient,
# underflows to exactly 0 in float32 and float64, while every value stays
# finite. float16/bfloat16 logits are computed in float32 (1e9 would overflow
# float16).
MASKED_LOG_PROPORTION = -1e9

_HALF_DTYPES = (tf.float16, tf.bfloat16)

_OUT_OF_RANGE_MESSAGE = (
    'WSM labels are out of range: every label must be in [0, num_classes) '
    'with num_classes = {}.'
)


def _check_labels_in_range(
    labels: tf.Tensor, num_classes: Union[int, tf.Tensor]
) -> tf.Tensor:
  """Returns `labels`, asserted to lie in `[0, num_classes)`.

  The assertion runs before any op consuming the returned tensor, in eager
  mode and inside a `tf.function` alike.

  Args:
    labels: An integer tensor of any shape.
    num_classes: A Python int or scalar integer tensor.

  Returns:
    `labels`, with the assertion as a control dependency.

  Raises:
    tf.errors.InvalidArgumentError: If a label is negative or `>= num_classes`;
      the message says the labels are out of range and gives `num_classes`.
  """
  static_num_classes = tf.get_static_value(num_classes)
  if static_num_classes is not None:
    message = _OUT_OF_RANGE_MESSAGE.format(int(static_num_classes))
  else:
    message = tf.strings.format(_OUT_OF_RANGE_MESSAGE, num_classes)
  num_classes = tf.cast(num_classes, labels.dtype)
  in_range = tf.reduce_all(tf.logical_and(labels >= 0, labels < num_classes))
  check = tf.debugging.Assert(in_range, [message, 'Labels:', labels])
  with tf.control_dependencies([check]):
    return tf.identity(labels)


def _log_proportions(class_proportions: tf.Tensor) -> tf.Tensor:
  """`log(beta)` with `log(beta_c <= 0)` := `MASKED_LOG_PROPORTION`.

  Args:
    class_proportions: A float tensor `beta` of shape [num_classes].

  Returns:
    A tensor of the same shape and dtype, finite everywhere, whose gradient
    with respect to `class_proportions` is finite as well.
  """
  present = class_proportions > 0
  # Take the log of 1 for masked classes: tf.where would otherwise propagate
  # the NaN gradient of log(0) to `class_proportions`.
  safe = tf.where(present, class_proportions, tf.ones_like(class_proportions))
  masked = tf.fill(
      tf.shape(class_proportions),
      tf.constant(MASKED_LOG_PROPORTION, class_proportions.dtype),
  )
  return tf.where(present, tf.math.log(safe), masked)


@tf.function(reduce_retracing=True)
def wsm_cross_entropy(
    labels: tf.Tensor, logits: tf.Tensor, class_proportions: tf.Tensor
) -> tf.Tensor:
  """Per-example WSM cross-entropy `-log softmax(logits + log(beta))[labels]`.

  With `z` the logits and `beta` the class proportions,

    l(z, y) = -log(beta_y e^{z_y} / sum_c beta_c e^{z_c})
            = -log softmax(z + log(beta))_y,

  the re-weighted softmax loss of the paper's Eq. 4 up to the per-example
  constant `-log(beta_y)`, so with the same gradient
  `dl/dz_j = beta_j e^{z_j} / sum_c beta_c e^{z_c} - [j == y]`; unlike Eq. 4
  it is non-negative (docs/design.md sec. 2). Computed with
  `tf.nn.sparse_softmax_cross_entropy_with_logits` for numerical stability.
  Classes with proportion 0 contribute nothing to the softmax denominator and
  receive an exactly-0 gradient; the result is finite for any finite logits of
  magnitude well below 1e9 (e.g. 1e4).

  Args:
    labels: Integer tensor of shape [batch] (or [batch, 1]) with values in
      `[0, num_classes)`.
    logits: Float tensor of shape [batch, num_classes], the unnormalized model
      outputs `f_w(x)`.
    class_proportions: Float tensor `beta` of shape [num_classes], the client's
      `n_c / n` (see `class_proportions_from_dataset`). Entries `<= 0` mask
      their class.

  Returns:
    Float tensor of shape [batch]: the per-example loss, in the dtype of
    `logits` (float32 for float16/bfloat16 logits).

  Raises:
    tf.errors.InvalidArgumentError: If a label is outside `[0, num_classes)`
      (message: "WSM labels are out of range ... num_classes = C"), or if
      `class_proportions` does not have `num_classes` entries.
  """
  logits = tf.convert_to_tensor(logits)
  if logits.dtype in _HALF_DTYPES:
    logits = tf.cast(logits, tf.float32)
  labels = tf.convert_to_tensor(labels)
  if labels.shape.rank == 2:
    labels = tf.squeeze(labels, axis=-1)
  class_proportions = tf.cast(class_proportions, logits.dtype)

  num_classes = logits.shape[-1]
  if num_classes is None:
    num_classes = tf.shape(logits)[-1]
  labels = _check_labels_in_range(labels, num_classes)
  with tf.control_dependencies(
      [
          tf.debugging.assert_equal(
              tf.size(class_proportions),
              tf.cast(num_classes, tf.int32),
              message='class_proportions must have num_classes entries.',
          )
      ]
  ):
    shifted_logits = logits + _log_proportions(class_proportions)
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=shifted_logits
  )


def class_proportions_from_dataset(
    dataset: tf.data.Dataset,
    num_classes: int,
    label_key: str = labels_lib.DEFAULT_LABEL_KEY,
) -> tf.Tensor:
  """Client class proportions `beta_c = n_c / n` (paper Eq. 4), in one pass.

  Uses `dataset.reduce`, so it also runs inside a `tf.function` or a TFF
  client computation (docs/design.md sec. 2: computed once per round, before
  local training).

  Args:
    dataset: A `tf.data.Dataset` whose elements are either mappings (dict,
      `OrderedDict`) holding the labels under `label_key`, or `(x, y)` tuples
      whose labels are element[1]. Labels are integer tensors of shape [batch]
      or [batch, 1] (or scalars, for an unbatched dataset).
    num_classes: The number of classes C (Python int).
    label_key: The labels' key for mapping elements.

  Returns:
    A float32 tensor of shape [num_classes] with `n_c / n`; all zeros for an
    empty dataset.

  Raises:
    TypeError: If the elements are neither mappings nor tuples/lists of length
      >= 2, or the labels are not integers.
    KeyError: If mapping elements have no `label_key`.
    tf.errors.InvalidArgumentError: If a label is outside `[0, num_classes)`,
      with the same message as `wsm_cross_entropy`.
  """
  labels_lib.integer_label_spec(dataset.element_spec, label_key)

  def add_batch(counts, element):
    return counts + _label_counts(
        labels_lib.batch_labels(element, label_key), num_classes
    )

  counts = dataset.reduce(tf.zeros([num_classes], tf.int64), add_batch)
  return _proportions(counts)


def class_proportions_from_labels(
    labels: tf.Tensor, num_classes: int
) -> tf.Tensor:
  """Class proportions `beta_c = n_c / n` (paper Eq. 4) of all `labels`.

  The same numbers as `class_proportions_from_dataset` over a dataset
  holding these labels, for a client whose labels are already in one
  tensor (`tff_fedwin.algorithms.client_loop.HeldBatches.labels`).

  Args:
    labels: An integer tensor of any shape: every label of the client.
    num_classes: The number of classes C (Python int).

  Returns:
    A float32 tensor of shape [num_classes] with `n_c / n`; all zeros if
    `labels` is empty.

  Raises:
    tf.errors.InvalidArgumentError: If a label is outside `[0, num_classes)`,
      with the same message as `wsm_cross_entropy`.
  """
  return _proportions(_label_counts(labels, num_classes))


def _label_counts(labels: tf.Tensor, num_classes: int) -> tf.Tensor:
  """int64 [num_classes]: how often each class occurs in `labels` (checked)."""
  labels = _check_labels_in_range(tf.reshape(labels, [-1]), num_classes)
  return tf.math.bincount(
      tf.cast(labels, tf.int32),
      minlength=num_classes,
      maxlength=num_classes,
      dtype=tf.int64,
  )


def _proportions(counts: tf.Tensor) -> tf.Tensor:
  """float32 `counts / sum(counts)`, in float64 (zeros for no labels)."""
  counts = tf.cast(counts, tf.float64)
  proportions = tf.math.divide_no_nan(counts, tf.reduce_sum(counts))
  return tf.cast(proportions, tf.float32)
