"""The model families the round-time benchmarks run: a CNN and two LSTMs.

* `cnn`: EMNIST-62 `cnn_dropout` (1.2M parameters) on 28x28 images.
* `word_lstm`: TFF's StackOverflow next-word LSTM (embedding 96, LSTM 670,
  dense 96, logits over 10,000 + 4 ids; 4.05M parameters) on sequences of
  20 ids, TFF's layout (`tasks.text`, the `text` task's model).
* `char_lstm`: the `shakespeare` task's character LSTM (embedding 8, LSTM
  128, logits over 99 ids) on sequences of 80 characters.

Each family gives the TFF model (`model_fn`, the loss and metrics its task
trains with), the bare Keras model for the bound (`tensor_rounds`: plain
softmax cross-entropy over every position, which equals the masked loss:
the synthetic sequences hold no padding id) and synthetic clients of equal
size (`client_data`).
"""

import collections
from collections.abc import Callable
from typing import Any, Optional

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import choices
from tff_fedwin import tasks
from tff_fedwin.tasks import feature_model
from tff_fedwin.tasks import registry as tasks_registry
from tff_fedwin.tasks import shakespeare as shakespeare_lib
from tff_fedwin.tasks import text as text_lib

# The StackOverflow id space: 10,000 words, padding, OOV, BOS and EOS.
WORD_IDS = 10_000 + 4
WORD_SEQUENCE_LENGTH = 20
NAMES = choices.BENCHMARK_MODEL_FAMILIES


@attrs.frozen
class ModelFamily:
  """One family (module docstring).

  Attributes:
    name: One of `NAMES`.
    description: The model and its data, for a table's header.
    keras_fn: A new Keras model (logits), for the bound.
    model_fn: A new TFF model, for the processes.
    feature_model_fn: `model_fn`'s model as a `FeatureModel` (FedFA's row),
      or None.
    client_data: `(clients, steps, batch_size) -> [tf.data.Dataset]`, each
      client `steps` full batches.
    classification: One label per example (WSM's rows apply).
  """

  name: str
  description: str
  keras_fn: Callable[[], tf.keras.Model]
  model_fn: Callable[[], tff.learning.models.VariableModel]
  client_data: Callable[[int, int, int], list[tf.data.Dataset]]
  classification: bool
  feature_model_fn: Optional[
      Callable[[], tff.learning.models.VariableModel]
  ] = None


def _sequence_data(num_ids: int, length: int):
  """Clients of random ids in [1, num_ids) (no padding), x and y."""

  def client_data(clients, steps, batch_size, seed=0):
    rng = np.random.default_rng(seed)
    datasets = []
    for _ in range(clients):
      ids = rng.integers(1, num_ids, (steps * batch_size, length + 1))
      ids = ids.astype(np.int32)
      datasets.append(
          tf.data.Dataset.from_tensor_slices(
              collections.OrderedDict(x=ids[:, :-1], y=ids[:, 1:])
          ).batch(batch_size)
      )
    return datasets

  return client_data


def _sequence_spec(length: int) -> Any:
  return collections.OrderedDict(
      x=tf.TensorSpec([None, length], tf.int32),
      y=tf.TensorSpec([None, length], tf.int32),
  )


def _cnn() -> ModelFamily:
  def keras_args():
    return dict(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=tasks.emnist_input_spec(),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
    )

  def model_fn():
    return tff.learning.models.from_keras_model(
        tasks.create_cnn_dropout_model(), **keras_args()
    )

  def feature_model_fn():
    return feature_model.FeatureModel(
        tasks.create_cnn_dropout_model(), **keras_args()
    )

  return ModelFamily(
      'cnn',
      'EMNIST-62 cnn_dropout (1.2M params)',
      tasks.create_cnn_dropout_model,
      model_fn,
      lambda clients, steps, batch: tasks.synthetic_client_datasets(
          clients, steps * batch, batch, seed=0
      ),
      classification=True,
      feature_model_fn=feature_model_fn,
  )


def _word_lstm() -> ModelFamily:
  length = WORD_SEQUENCE_LENGTH
  keras_fn = lambda: text_lib.create_recurrent_model(
      WORD_IDS, sequence_length=length
  )
  # The text task's loss and accuracy (padding 0; OOV and EOS left out).
  excluded = (WORD_IDS - 3, WORD_IDS - 1)

  def model_fn():
    return tff.learning.models.from_keras_model(
        keras_fn(),
        loss=shakespeare_lib.MaskedSparseCategoricalCrossentropy(0),
        input_spec=_sequence_spec(length),
        metrics=[
            shakespeare_lib.MaskedSparseCategoricalAccuracy(
                0, 'accuracy', excluded_ids=excluded
            )
        ],
    )

  return ModelFamily(
      'word_lstm',
      "TFF's StackOverflow word LSTM (4.05M params, 10,004 ids, sequences "
      'of 20)',
      keras_fn,
      model_fn,
      _sequence_data(WORD_IDS, length),
      classification=False,
  )


def _char_lstm() -> ModelFamily:
  length = shakespeare_lib.DEFAULT_SEQ_LENGTH
  vocab = tasks_registry.SHAKESPEARE_VOCAB_SIZE
  keras_fn = lambda: shakespeare_lib.create_char_model(vocab, seq_length=length)

  def model_fn():
    return tff.learning.models.from_keras_model(
        keras_fn(),
        loss=shakespeare_lib.MaskedSparseCategoricalCrossentropy(),
        input_spec=_sequence_spec(length),
        metrics=[
            shakespeare_lib.MaskedSparseCategoricalAccuracy(name='accuracy')
        ],
    )

  return ModelFamily(
      'char_lstm',
      f'the shakespeare character LSTM ({vocab} ids, sequences of {length})',
      keras_fn,
      model_fn,
      _sequence_data(vocab, length),
      classification=False,
  )


def family(name: str) -> ModelFamily:
  """The family `name` (one of `NAMES`).

  Raises:
    ValueError: If `name` is not one of `NAMES`.
  """
  builders = {'cnn': _cnn, 'word_lstm': _word_lstm, 'char_lstm': _char_lstm}
  if name not in builders:
    raise ValueError(f'`name` must be one of {NAMES}, got {name!r}.')
  return builders[name]()
