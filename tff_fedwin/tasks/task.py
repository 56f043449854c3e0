"""`Task`: a model, federated training data and a centralized test set.

Also the two pieces every task builder shares: the classification
`model_fn` (logits, plain cross-entropy, accuracy) and the client batching.
"""

import collections
from collections.abc import Callable
from typing import Any, Optional

import attrs
import tensorflow as tf
import tensorflow_federated as tff


@attrs.frozen
class Task:
  """A federated learning task.

  Attributes:
    name: The task name.
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`
      whose predictions are logits.
    train_data: `tff.simulation.datasets.ClientData` of unbatched examples.
    preprocess_fn: Client dataset -> batched (and repeated) training dataset.
    test_data: Batched centralized `tf.data.Dataset` for evaluation.
    num_classes: Number of output classes (vocabulary size for text tasks).
    pad_label: Label id of padding in sequence tasks (not scored), or None.
  """

  name: str
  model_fn: Callable[[], tff.learning.models.VariableModel]
  train_data: tff.simulation.datasets.ClientData
  preprocess_fn: Callable[[tf.data.Dataset], tf.data.Dataset]
  test_data: tf.data.Dataset
  num_classes: int
  pad_label: Optional[int] = None

  def build_evaluate_fn(self) -> Callable[[Any], dict[str, float]]:
    """Returns `ModelWeights -> {'loss', 'accuracy'}` on the test set.

    `loss` is the model's own loss (plain cross-entropy) averaged over test
    examples; `accuracy` is the fraction of argmax predictions equal to the
    label, ignoring `pad_label` positions of sequence tasks. Runs the TFF
    model's forward pass in this process (no TFF call). The test batches are
    materialized once, here; each evaluation runs one traced call per batch
    and sums in float64 (why: docs/design.md sec. 7).
    """
    model = self.model_fn()
    pad_label = self.pad_label
    batches = list(self.test_data)

    @tf.function
    def evaluate_batch(batch):
      output = model.forward_pass(batch, training=False)
      # Test batches are built by this package's tasks: `y` or index 1.
      # (tasks -> losses is not an edge of the import graph, docs sec. 4.)
      labels = batch['y'] if isinstance(batch, dict) else batch[1]
      labels = tf.cast(
          tf.reshape(labels, tf.shape(output.predictions)[:-1]), tf.int64
      )
      hits = tf.equal(tf.argmax(output.predictions, axis=-1), labels)
      mask = (
          tf.ones_like(hits)
          if pad_label is None
          else tf.not_equal(labels, pad_label)
      )
      n = tf.cast(output.num_examples, tf.float64)
      return tf.stack(
          [
              tf.cast(output.loss, tf.float64) * n,
              n,
              tf.reduce_sum(tf.cast(tf.logical_and(hits, mask), tf.float64)),
              tf.reduce_sum(tf.cast(mask, tf.float64)),
          ]
      )

    def evaluate(model_weights) -> dict[str, float]:
      model_weights.assign_weights_to(model)
      loss_sum, num_examples, correct, counted = 0.0, 0.0, 0.0, 0.0
      for batch in batches:
        batch_loss, n, batch_correct, batch_counted = (
            evaluate_batch(batch).numpy().tolist()
        )
        loss_sum += batch_loss
        num_examples += n
        correct += batch_correct
        counted += batch_counted
      return collections.OrderedDict(
          loss=loss_sum / num_examples if num_examples else 0.0,
          accuracy=correct / counted if counted else 0.0,
      )

    return evaluate


def classification_model_fn(keras_fn, element_spec):
  """A `model_fn` of `keras_fn()` with logits, cross-entropy and accuracy."""

  def model_fn():
    return tff.learning.models.from_keras_model(
        keras_fn(),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=element_spec,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
    )

  return model_fn


def batching_fn(
    batch_size: int, epochs: int, seed: int, shuffle_buffer: int = 1000
):
  """Client dataset -> shuffled (seeded), repeated `epochs` times, batched."""

  def preprocess(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return (
        dataset.shuffle(shuffle_buffer, seed=seed)
        .repeat(epochs)
        .batch(batch_size)
    )

  return preprocess
