"""Next-character prediction model for federated Shakespeare.

`create_char_model` follows TFF's Shakespeare baseline
(`tff.simulation.baselines.shakespeare`, after McMahan et al. 2017), smaller by
default (docs/performance.md, 'The Shakespeare model'). The masked loss and
accuracy skip the padding targets of `tff_fedwin.data.shakespeare` examples.
"""

import collections
from collections.abc import Sequence

import tensorflow as tf

from tff_fedwin import checks

DEFAULT_SEQ_LENGTH = 80


def create_char_model(
    vocab_size: int,
    *,
    embedding_dim: int = 8,
    lstm_units: int = 128,
    num_lstm_layers: int = 1,
    seq_length: int = DEFAULT_SEQ_LENGTH,
    seed: int = 0,
) -> tf.keras.Model:
  """Keras character LSTM with logits output; deterministic with `seed`.

  A character embedding, `num_lstm_layers` LSTM layers returning sequences,
  and a dense layer of `vocab_size` logits per position. TFF's baseline size
  is `lstm_units=256, num_lstm_layers=2`.

  Args:
    vocab_size: Number of character ids, including pad/oov/bos/eos
      (`tff_fedwin.data.shakespeare.VOCAB_SIZE`); id 0 is padding.
    embedding_dim: Size of the character embedding.
    lstm_units: Units of each LSTM layer.
    num_lstm_layers: Number of stacked LSTM layers.
    seq_length: Length of the int32 input sequences.
    seed: Seed of the weight initializers.

  Returns:
    An uncompiled `tf.keras.Model` mapping int32 `[batch, seq_length]` ids to
    float32 logits `[batch, seq_length, vocab_size]` (no softmax).

  Raises:
    ValueError: If an argument is not a positive integer.
  """
  for name, value in (
      ('vocab_size', vocab_size),
      ('embedding_dim', embedding_dim),
      ('lstm_units', lstm_units),
      ('num_lstm_layers', num_lstm_layers),
      ('seq_length', seq_length),
  ):
    checks.check_int(name, value, minimum=1)
  inputs = tf.keras.Input(shape=[seq_length], dtype=tf.int32)
  hidden = tf.keras.layers.Embedding(
      vocab_size,
      embedding_dim,
      mask_zero=False,
      embeddings_initializer=tf.keras.initializers.RandomUniform(
          -0.05, 0.05, seed=seed
      ),
  )(inputs)
  for i in range(num_lstm_layers):
    hidden = tf.keras.layers.LSTM(
        lstm_units,
        return_sequences=True,
        kernel_initializer=tf.keras.initializers.HeNormal(seed=seed + 1 + i),
        recurrent_initializer=tf.keras.initializers.Orthogonal(
            seed=seed + 101 + i
        ),
    )(hidden)
  logits = tf.keras.layers.Dense(
      vocab_size,
      kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 201),
  )(hidden)
  return tf.keras.Model(inputs=inputs, outputs=logits)


def shakespeare_input_spec(
    seq_length: int = DEFAULT_SEQ_LENGTH,
) -> collections.OrderedDict:
  """Batches of OrderedDict(x=int32[b, seq_length], y=int32[b, seq_length])."""
  checks.check_int('seq_length', seq_length, minimum=1)
  return collections.OrderedDict(
      x=tf.TensorSpec([None, seq_length], tf.int32),
      y=tf.TensorSpec([None, seq_length], tf.int32),
  )


def _per_position(sample_weight, like: tf.Tensor) -> tf.Tensor:
  """`sample_weight` ([batch] or [batch, seq]) cast and shaped like `like`."""
  sample_weight = tf.cast(sample_weight, like.dtype)
  while sample_weight.shape.rank < like.shape.rank:
    sample_weight = sample_weight[..., tf.newaxis]
  return tf.broadcast_to(sample_weight, tf.shape(like))


class MaskedSparseCategoricalCrossentropy(tf.keras.losses.Loss):
  """Softmax cross-entropy on logits, averaged over targets that are not pad.

  Calling it returns the batch loss `sum(ce * w) / sum(w)`, where
  `w = (y_true != pad_id)` (times `sample_weight` if given): the mean over real
  targets, and 0 for a batch of padding only. `call` returns the per-position
  `ce * (y_true != pad_id)`. The normalization needs the mask, so `__call__`
  reduces itself (the `reduction` argument of Keras losses does not apply).

  It masks identically in Keras and inside `tff.learning.models.
  from_keras_model`, which calls the loss directly. The model's embedding
  deliberately does not use `mask_zero`: a Keras mask on the logits is applied
  by `Loss.__call__` in Keras but is lost inside TFF's forward pass, so the
  stock losses would average over different positions in the two; with the
  stock `SparseCategoricalCrossentropy`, pad targets count as ordinary ones.
  """

  def __init__(
      self,
      pad_id: int = 0,
      name: str = 'masked_sparse_categorical_crossentropy',
  ):
    super().__init__(reduction=tf.keras.losses.Reduction.SUM, name=name)
    self._pad_id = pad_id

  def _weights(self, y_true, dtype):
    return tf.cast(tf.not_equal(y_true, self._pad_id), dtype)

  def call(self, y_true, y_pred):
    y_true = tf.cast(y_true, tf.int32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y_true, logits=y_pred
    )
    return losses * self._weights(y_true, losses.dtype)

  def __call__(self, y_true, y_pred, sample_weight=None):
    with tf.name_scope(self.name):
      y_true = tf.cast(y_true, tf.int32)
      y_pred = tf.convert_to_tensor(y_pred)
      losses = self.call(y_true, y_pred)
      weights = self._weights(y_true, losses.dtype)
      if sample_weight is not None:
        sample_weight = _per_position(sample_weight, losses)
        weights *= sample_weight
        losses *= sample_weight
      return tf.math.divide_no_nan(
          tf.reduce_sum(losses), tf.reduce_sum(weights)
      )

  def get_config(self):
    return {'pad_id': self._pad_id, 'name': self.name}


class MaskedSparseCategoricalAccuracy(
    tf.keras.metrics.SparseCategoricalAccuracy
):
  """Accuracy of the arg-max logit over targets that are none of the masked.

  The masked targets are `pad_id` and `excluded_ids` (e.g. OOV and EOS for
  TFF's StackOverflow accuracy: `MaskedCategoricalAccuracy` of TFF's
  `simulation/baselines/keras_metrics.py`, not a public `tff.*` name).
  """

  def __init__(
      self,
      pad_id: int = 0,
      name: str = 'masked_sparse_categorical_accuracy',
      dtype=None,
      excluded_ids: Sequence[int] = (),
  ):
    super().__init__(name=name, dtype=dtype)
    self._pad_id = pad_id
    self._excluded_ids = tuple(int(i) for i in excluded_ids)

  def update_state(self, y_true, y_pred, sample_weight=None):
    y_true = tf.cast(y_true, tf.int32)
    weights = tf.ones_like(y_true, self.dtype)
    for masked in (self._pad_id, *self._excluded_ids):
      weights *= tf.cast(tf.not_equal(y_true, masked), self.dtype)
    if sample_weight is not None:
      weights *= _per_position(sample_weight, weights)
    return super().update_state(y_true, y_pred, sample_weight=weights)

  def get_config(self):
    config = super().get_config()
    config['pad_id'] = self._pad_id
    config['excluded_ids'] = self._excluded_ids
    return config
