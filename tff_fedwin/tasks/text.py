"""Next-word (or next-character) prediction on one's own per-client text.

The StackOverflow word-prediction task of TFF
(`tensorflow_federated/python/simulation/baselines/stackoverflow/
word_prediction_tasks.py`, `create_word_prediction_task_from_datasets`) on a
JSONL or CSV file of `client_id`, `text` and optional `split` records
(`tff_fedwin.data.text_records`), one client per `client_id`, with TFF's
tokens, vocabulary and id layout (`tff_fedwin.data.text_vocab`) and TFF's
model family (`create_recurrent_model`). TFF's model and its masked
accuracy are not public `tff.*` names: this module has its copy of the model,
`shakespeare.MaskedSparseCategoricalAccuracy` the accuracy.

Reported like TFF: the loss is the cross-entropy over the targets that are
not padding; the accuracy (`'accuracy'`, both the model's metric and the
test-set evaluation) is TFF's
`accuracy_without_out_of_vocab_or_end_of_sentence`: the arg-max hits over
the targets that are not padding, OOV or EOS (BOS is never a target).
"""

import collections
from typing import Optional

import attrs
import numpy as np
import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin.data import partition
from tff_fedwin.data import preloaded
from tff_fedwin.data import text_records
from tff_fedwin.data import text_vocab
from tff_fedwin.tasks import per_client
from tff_fedwin.tasks import task as task_lib

# TFF's `create_recurrent_model` defaults (StackOverflow baseline).
EMBEDDING_SIZE = 96
LSTM_SIZE = 670
# `--text_model` -> (embedding size, LSTM units): TFF's StackOverflow sizes,
# or a model ~5x smaller at TFF's vocabulary (10,004 ids: 0.74M parameters
# against 4.05M; `create_recurrent_model`'s count) that trains a round
# several times faster on a CPU.
TEXT_MODEL_SIZES = {
    'tff': (EMBEDDING_SIZE, LSTM_SIZE),
    'small': (32, 128),
}


def create_recurrent_model(
    num_ids: int,
    *,
    sequence_length: int,
    embedding_size: int = EMBEDDING_SIZE,
    lstm_size: int = LSTM_SIZE,
    num_lstm_layers: int = 1,
    seed: int = 0,
) -> tf.keras.Model:
  """TFF's StackOverflow recurrent model, with seeded initializers.

  Our copy of `create_recurrent_model` in TFF's
  `simulation/baselines/stackoverflow/word_prediction_models.py` (not a
  public `tff.*` name; `shared_embedding=False`): an embedding of
  `embedding_size`, then per layer an LSTM of `lstm_size` (returning
  sequences) followed by a dense layer of `embedding_size`, then dense
  logits over the `num_ids` ids. Its parameters: `num_ids * E` +
  `L * (4 * H * (E + H + 1) + H * E + E)` + `E * num_ids + num_ids`
  (E = embedding_size, H = lstm_size, L = num_lstm_layers), TFF's.

  Two differences that change no scored output: the input is int32 of a
  fixed `sequence_length`, and the embedding has no `mask_zero` (as
  `tff_fedwin.tasks.shakespeare.create_char_model`): padding only trails a
  sequence, so the outputs at non-padding positions are those of TFF's
  masked model, and padding targets are left out of the loss and accuracy.

  Args:
    num_ids: The id space, `Vocabulary.num_ids` (vocabulary + 4 specials).
    sequence_length: Length of the int32 input sequences.
    embedding_size: E; TFF's default 96.
    lstm_size: H; TFF's default 670.
    num_lstm_layers: L; TFF's default 1.
    seed: Seed of the weight initializers.

  Returns:
    An uncompiled `tf.keras.Model`: int32 `[batch, sequence_length]` ->
    float32 logits `[batch, sequence_length, num_ids]`.

  Raises:
    ValueError: If an argument is not a positive integer.
  """
  for name, value in (
      ('num_ids', num_ids),
      ('sequence_length', sequence_length),
      ('embedding_size', embedding_size),
      ('lstm_size', lstm_size),
      ('num_lstm_layers', num_lstm_layers),
  ):
    checks.check_int(name, value, minimum=1)
  inputs = tf.keras.Input(shape=[sequence_length], dtype=tf.int32)
  projected = tf.keras.layers.Embedding(
      num_ids,
      embedding_size,
      embeddings_initializer=tf.keras.initializers.RandomUniform(
          -0.05, 0.05, seed=seed
      ),
  )(inputs)
  for i in range(num_lstm_layers):
    processed = tf.keras.layers.LSTM(
        lstm_size,
        return_sequences=True,
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed + 1 + i),
        recurrent_initializer=tf.keras.initializers.Orthogonal(
            seed=seed + 101 + i
        ),
    )(projected)
    projected = tf.keras.layers.Dense(
        embedding_size,
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed + 201 + i),
    )(processed)
  logits = tf.keras.layers.Dense(
      num_ids,
      kernel_initializer=tf.keras.initializers.GlorotUniform(seed + 301),
  )(projected)
  return tf.keras.Model(inputs=inputs, outputs=logits)


@attrs.frozen
class TextData:
  """A text file as id arrays.

  Attributes:
    vocab: The `text_vocab.Vocabulary` of the training texts.
    client_ids: The clients, sorted.
    train: client id -> `(x, y)` int32 `[n, sequence_length]` examples.
    test: `(x, y)` of the pooled test texts, in file order.
    test_clients: The client of each of `test`'s examples.
  """

  vocab: text_vocab.Vocabulary
  client_ids: tuple[str, ...]
  train: dict[str, tuple[np.ndarray, np.ndarray]]
  test: tuple[np.ndarray, np.ndarray]
  test_clients: per_client.TestClients


def load_text_data(
    path: str,
    *,
    level: str = 'word',
    tokenizer: str = 'words',
    vocab_size: int = 10000,
    sequence_length: int = 20,
    test_fraction: float = 0.2,
) -> TextData:
  """Reads, splits, tokenizes and numbers the records of `path`.

  Arguments as `text_task`; raises its errors.
  """
  text_vocab.check_level(level)
  text_vocab.check_tokenizer(tokenizer)
  checks.check_int('vocab_size', vocab_size, minimum=1)
  checks.check_int('sequence_length', sequence_length, minimum=1)
  splits = preloaded.take(text_records.load_text_splits, path, test_fraction)
  train_texts = [t for c in splits.client_ids for t in splits.train[c]]
  try:
    vocab = text_vocab.build_vocabulary(
        train_texts, vocab_size=vocab_size, level=level, tokenizer=tokenizer
    )
  except ValueError as e:
    raise text_records.TextDataError(f'{path}: {e}') from e
  train = {
      c: text_vocab.texts_to_arrays(splits.train[c], vocab, sequence_length)
      for c in splits.client_ids
  }
  *test, counts = text_vocab.texts_to_arrays(
      splits.test, vocab, sequence_length, return_counts=True
  )
  test_ids = sorted(set(splits.test_clients))
  index = {c: i for i, c in enumerate(test_ids)}
  example_client = np.repeat([index[c] for c in splits.test_clients], counts)
  return TextData(
      vocab,
      splits.client_ids,
      train,
      tuple(test),
      per_client.TestClients(tuple(test_ids), example_client),
  )


def text_task(
    path: str,
    *,
    level: str = 'word',
    tokenizer: str = 'words',
    vocab_size: int = 10000,
    sequence_length: int = 20,
    test_fraction: float = 0.2,
    batch_size: int,
    epochs: int,
    seed: int,
    eval_batch_size: int = 1000,
    embedding_size: int = EMBEDDING_SIZE,
    lstm_size: int = LSTM_SIZE,
    shuffle_buffer: Optional[int] = None,
) -> task_lib.Task:
  """The text task of `path` (module docstring), named `'text'`.

  Args:
    path: A `.jsonl` or `.csv` file (`tff_fedwin.data.text_records`).
    level: `'word'` (TFF's StackOverflow) or `'char'`
      (`tff_fedwin.data.text_vocab`).
    tokenizer: Word level: `'words'` (raw text: lowercased, punctuation as
      tokens) or `'whitespace'` (pre-tokenized text; `text_vocab.TOKENIZERS`).
    vocab_size: The most frequent training tokens kept (TFF's 10000).
    sequence_length: Length of each example's `x` and `y` (TFF's 20).
    test_fraction: In `[0, 1)`: the last fraction of each client's records
      that are test records, for a file without a `split` field.
    batch_size: Client batch size.
    epochs: Local epochs per round.
    seed: Seed of the client shuffling and the model's initialization.
    eval_batch_size: Batch size of the test set.
    embedding_size: The model's embedding and projection size.
    lstm_size: The model's LSTM units (`TEXT_MODEL_SIZES` has both by
      `--text_model`).
    shuffle_buffer: The clients' shuffle buffer (`task.batching_fn`).

  Returns:
    A `Task`: `train_data` a `ClientData` of unbatched
    `OrderedDict(x=int32[L], y=int32[L])` per client id (sorted);
    `test_data` the pooled test examples, batched; `num_classes` the id
    space `V + 4`; `pad_label=0`; `accuracy_excluded_labels` OOV and EOS.

  Raises:
    text_records.TextDataError: If the file or `test_fraction` cannot be
      used (one line naming the file, line or client, and the problem).
    ValueError: If another argument is out of range.
  """
  for name, value in (
      ('batch_size', batch_size),
      ('epochs', epochs),
      ('eval_batch_size', eval_batch_size),
  ):
    checks.check_int(name, value, minimum=1)
  data = load_text_data(
      path,
      level=level,
      tokenizer=tokenizer,
      vocab_size=vocab_size,
      sequence_length=sequence_length,
      test_fraction=test_fraction,
  )
  vocab = data.vocab
  train_data = partition.client_data_from_arrays(
      data.client_ids, [data.train[c] for c in data.client_ids]
  )
  excluded = (vocab.oov_id, vocab.eos_id)
  model_fn = task_lib.sequence_model_fn(
      lambda: create_recurrent_model(
          vocab.num_ids,
          sequence_length=sequence_length,
          embedding_size=embedding_size,
          lstm_size=lstm_size,
          seed=seed,
      ),
      sequence_length,
      text_vocab.PAD_ID,
      excluded,
  )
  test_data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=data.test[0], y=data.test[1])
  ).batch(eval_batch_size)
  return task_lib.Task(
      'text',
      model_fn,
      train_data,
      task_lib.batching_fn(batch_size, epochs, seed, shuffle_buffer),
      test_data,
      vocab.num_ids,
      pad_label=text_vocab.PAD_ID,
      accuracy_excluded_labels=excluded,
      test_clients=data.test_clients,
  )
