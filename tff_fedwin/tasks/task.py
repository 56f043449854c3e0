"""`Task`: a model, federated training data and a centralized test set.

Also the pieces every task builder shares: the classification `model_fn`
(logits, plain cross-entropy, accuracy), its masked counterpart for sequences
and the client batching.
"""

from collections.abc import Callable, Sequence
import inspect
from typing import Any, Optional

import attrs
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import choices
from tff_fedwin.tasks import evaluation
from tff_fedwin.tasks import feature_model
from tff_fedwin.tasks import per_client
from tff_fedwin.tasks import shakespeare


@attrs.frozen
class Task:
  """A federated learning task.

  Attributes:
    name: The task name.
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`
      whose predictions are logits.
    train_data: `tff.simulation.datasets.ClientData` of unbatched examples.
    preprocess_fn: `(client dataset, shuffle_seed=None) -> batched (and
      repeated) training dataset`; the training loop passes each round's
      `shuffle_seed` (`tff_fedwin.training.sampling.client_shuffle_seed`).
    test_data: Batched centralized `tf.data.Dataset` for evaluation.
    num_classes: Number of output classes (vocabulary size for text tasks).
    pad_label: Label id of padding in sequence tasks (not scored), or None.
    accuracy_excluded_labels: Further label ids the test accuracy leaves out
      (e.g. the text task's OOV and EOS, as TFF's StackOverflow task reports
      accuracy); the loss still leaves out `pad_label` only.
    test_clients: The client of each `test_data` example
      (`per_client.TestClients`), or None for a test set without clients.
    data_kind: What the data are where the name does not say it (task
      `leaf`: the LEAF kind, `choices.LEAF_DATA_KINDS`), else None.
    feature_model_fn: `model_fn`'s model as a `feature_model.FeatureModel`
      (features and classifier apart; FedFA's), or None if the task has
      none.
  """

  name: str
  model_fn: Callable[[], tff.learning.models.VariableModel]
  train_data: tff.simulation.datasets.ClientData
  preprocess_fn: Callable[..., tf.data.Dataset]
  test_data: tf.data.Dataset
  num_classes: int
  pad_label: Optional[int] = None
  accuracy_excluded_labels: tuple[int, ...] = ()
  test_clients: Optional[per_client.TestClients] = None
  data_kind: Optional[str] = None
  feature_model_fn: Optional[Callable[[], feature_model.FeatureModel]] = None

  def build_evaluate_fn(
      self, per_client_metrics: bool = False
  ) -> evaluation.TestSetEvaluator:
    """Returns `ModelWeights -> {'loss', 'accuracy'}` on the test set.

    A `TestSetEvaluator`: also `evaluate_all([ModelWeights, ...])`, several
    models in one pass over the test set.

    Args:
      per_client_metrics: Also evaluate each test client
        (`evaluate_all_per_client`; the training loop then writes
        per_client_metrics.csv).

    Raises:
      PerClientEvaluationError: If `per_client_metrics` and the test set has
        no clients.
    """
    if per_client_metrics and self.test_clients is None:
      raise per_client.PerClientEvaluationError(
          f'`eval_per_client` needs a test set with clients; the test set of '
          f'--task={self.name} has none (tasks with test clients: '
          f'{", ".join(choices.TASKS_WITH_TEST_CLIENTS)}).'
      )
    return evaluation.TestSetEvaluator(
        self.model_fn,
        self.test_data,
        self.pad_label,
        accuracy_excluded_labels=self.accuracy_excluded_labels,
        test_clients=self.test_clients if per_client_metrics else None,
    )


def _classification_args(element_spec) -> dict[str, Any]:
  """`from_keras_model`'s arguments for logits: cross-entropy, accuracy (new
  metric objects on every call)."""
  return dict(
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=element_spec,
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
  )


def classification_model_fn(keras_fn, element_spec):
  """A `model_fn` of `keras_fn()` with logits, cross-entropy and accuracy."""
  return lambda: tff.learning.models.from_keras_model(
      keras_fn(), **_classification_args(element_spec)
  )


def classification_feature_model_fn(keras_fn, element_spec):
  """`classification_model_fn`'s model as a `feature_model.FeatureModel`
  (`keras_fn()` a `tf.keras.Sequential`): a task's `feature_model_fn`."""
  return lambda: feature_model.FeatureModel(
      keras_fn(), **_classification_args(element_spec)
  )


def sequence_model_fn(
    keras_fn: Callable[[], tf.keras.Model],
    seq_length: int,
    pad_id: int,
    excluded_ids: Sequence[int] = (),
):
  """A `model_fn` of `keras_fn()` (logits at every position) on int32 `x`, `y`
  `[batch, seq_length]`: the loss and the accuracy (`'accuracy'`) leave out
  the `pad_id` targets, the accuracy also the `excluded_ids`
  (`shakespeare.MaskedSparseCategoricalCrossentropy`, `...Accuracy`)."""
  return lambda: tff.learning.models.from_keras_model(
      keras_fn(),
      loss=shakespeare.MaskedSparseCategoricalCrossentropy(pad_id),
      input_spec=shakespeare.shakespeare_input_spec(seq_length),
      metrics=[
          shakespeare.MaskedSparseCategoricalAccuracy(
              pad_id, 'accuracy', excluded_ids=excluded_ids
          )
      ],
  )


def classes_of_labels(largest_label: int, num_classes: int, source: str) -> int:
  """The classifier's outputs: 1 + `largest_label`, or `num_classes` if set.

  Args:
    largest_label: The largest label of the train and test splits.
    num_classes: 0 (the labels decide), or at least 1 + `largest_label`
      (more when the data lack the highest classes).
    source: What holds the labels, for the message.

  Raises:
    ValueError: One line naming `--num_classes` if a label is out of range.
  """
  if num_classes and largest_label >= num_classes:
    raise ValueError(
        f'--num_classes={num_classes}, but {source} holds the label '
        f'{largest_label}: labels must be in [0, num_classes); pass '
        f'--num_classes={largest_label + 1} or more, or 0 for 1 + the largest '
        'label.'
    )
  return num_classes or largest_label + 1


# The clients' shuffle buffer when the user gives none (`--client_shuffle_buffer`).
DEFAULT_SHUFFLE_BUFFER = 1000


def batching_fn(
    batch_size: int,
    epochs: int,
    seed: int,
    shuffle_buffer: Optional[int] = None,
):
  """`(dataset, shuffle_seed=None, epochs=None)` -> shuffled, repeated
  `epochs` times (the call's `epochs` if given: a round's, IMA's epoch
  decay), batched.

  The shuffle is seeded by `shuffle_seed` (an int, or an int64 scalar tensor
  in a worker's graph), else by `seed`: the training loop passes each
  client's seed of the round (`sampling.client_shuffle_seed`), so a client
  sees a new order every round it is picked; each of the `epochs` passes
  gets its own order too (tf.data reshuffles every iteration, from the
  seed). `shuffle_buffer`: the shuffle's buffer (`DEFAULT_SHUFFLE_BUFFER` if
  None); 1 keeps the client's order (TFF's `ClientSpec.shuffle_buffer_size`).
  """
  buffer = DEFAULT_SHUFFLE_BUFFER if shuffle_buffer is None else shuffle_buffer
  passes = epochs

  def preprocess(
      dataset: tf.data.Dataset,
      shuffle_seed: Any = None,
      epochs: Any = None,
  ) -> tf.data.Dataset:
    if buffer > 1:
      dataset = dataset.shuffle(
          buffer, seed=seed if shuffle_seed is None else shuffle_seed
      )
    return dataset.repeat(passes if epochs is None else epochs).batch(
        batch_size
    )

  return preprocess


def with_max_elements(task: Task, max_elements: int, batch_size: int) -> Task:
  """`task` whose clients train on at most `max_elements` examples a round.

  TFF's `ClientSpec.max_elements` (`tff.simulation.baselines`): the first
  `max_elements` examples of the client's preprocessed stream, i.e. after the
  shuffle and the epochs' repeat, before batching. Here the batches of
  `task.preprocess_fn` are unbatched, cut and batched again, which is the
  same stream (batching is sequential, the last batch may be partial) and
  works for every task's own preprocessing.

  Args:
    task: The task.
    max_elements: >= 1, or 0 for no cap (`task` itself).
    batch_size: The client batch size `task.preprocess_fn` batches by.

  Returns:
    The `Task` with the capped `preprocess_fn`.
  """
  if not max_elements:
    return task
  preprocess_fn = task.preprocess_fn

  def capped(
      dataset: tf.data.Dataset, shuffle_seed: Any = None, epochs: Any = None
  ):
    extra = {} if epochs is None else {'epochs': epochs}
    batches = preprocess_fn(dataset, shuffle_seed=shuffle_seed, **extra)
    return batches.unbatch().take(max_elements).batch(batch_size)

  if 'epochs' not in inspect.signature(preprocess_fn).parameters:
    # The same without `epochs`, which the task's preprocessing cannot take.
    return attrs.evolve(
        task,
        preprocess_fn=lambda dataset, shuffle_seed=None: capped(
            dataset, shuffle_seed
        ),
    )

  return attrs.evolve(task, preprocess_fn=capped)
