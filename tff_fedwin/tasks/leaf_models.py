"""LEAF's reference models (Caldas et al. 2018), in Keras, with logits output.

Each mirrors the TF 1 model of the LEAF repository (`models/<dataset>/`)
layer by layer; TF 1's default initializer, Glorot-uniform, is seeded here.

* `synthetic_log_reg` (`models/synthetic/log_reg.py`).
* `sent140_stacked_lstm` (`models/sent140/stacked_lstm.py`).
* `celeba_cnn` (`models/celeba/cnn.py`), with `BatchStatsNormalization`.
* `reddit_stacked_lstm` (`models/reddit/stacked_lstm.py`).
"""

import tensorflow as tf

from tff_fedwin import checks

SENT140_HIDDEN = 100  # LEAF's MODEL_PARAMS['sent140.stacked_lstm'] n_hidden.
REDDIT_HIDDEN = 256  # LEAF's MODEL_PARAMS['reddit.stacked_lstm'], 2 layers.
REDDIT_INIT_SCALE = 0.1  # Its ClientModel's init_scale.
CELEBA_FILTERS = 32
BATCH_NORM_EPSILON = 1e-3  # tf.layers.batch_normalization's default.


def _glorot(seed: int) -> tf.keras.initializers.Initializer:
  return tf.keras.initializers.GlorotUniform(seed=seed)


def synthetic_log_reg(
    x_width: int, num_classes: int, seed: int
) -> tf.keras.Model:
  """LEAF's Synthetic model (`models/synthetic/log_reg.py`), in Keras.

  `logits = sigmoid(x W + b)`, `W` `[x_width, num_classes]`: LEAF's
  `tf.layers.dense(features, num_classes, activation=tf.nn.sigmoid)`, whose
  outputs its loss takes as logits (`sparse_softmax_cross_entropy_with_
  logits`); Glorot-uniform `W` (TF 1's default, seeded) and zero `b`.
  """
  inputs = tf.keras.Input([x_width], dtype=tf.float32)
  outputs = tf.keras.layers.Dense(
      num_classes, activation='sigmoid', kernel_initializer=_glorot(seed)
  )(inputs)
  return tf.keras.Model(inputs, outputs)


def sent140_stacked_lstm(
    vocab_size: int, seq_length: int, num_classes: int, seed: int
) -> tf.keras.Model:
  """LEAF's Sent140 model (`models/sent140/stacked_lstm.py`), in Keras.

  int32 word ids `[batch, seq_length]` (`vocab_size` the unknown word, also
  the padding) -> an embedding `[vocab_size + 1, 100]` -> two stacked LSTMs
  of 100 units -> the last position's output -> dense 128 (no activation)
  -> dense `num_classes` logits: LEAF's `embedding`, `MultiRNNCell` of two
  `BasicLSTMCell(100)`, `outputs[:, -1, :]`, `dense(128)`, `dense(2)`.
  Parameters with LEAF's 2 classes: `100 (V + 1) + 2 * 4 * 100 * (100 + 100
  + 1) + 100 * 128 + 128 + 128 * 2 + 2` = `100 V + 174,086` for `V` words.

  Keras' LSTM adds its forget-gate bias of 1 to the initial bias, TF 1's
  `BasicLSTMCell` adds `forget_bias=1.0` at every step to a zero-initialized
  bias: the same function at initialization, a different parameterization.
  """
  checks.check_int('vocab_size', vocab_size, minimum=1)
  inputs = tf.keras.Input([seq_length], dtype=tf.int32)
  hidden = tf.keras.layers.Embedding(
      vocab_size + 1, SENT140_HIDDEN, embeddings_initializer=_glorot(seed)
  )(inputs)
  for i, last in ((0, False), (1, True)):
    hidden = tf.keras.layers.LSTM(
        SENT140_HIDDEN,
        return_sequences=not last,
        kernel_initializer=_glorot(seed + 1 + i),
        recurrent_initializer=_glorot(seed + 11 + i),
    )(hidden)
  hidden = tf.keras.layers.Dense(128, kernel_initializer=_glorot(seed + 21))(
      hidden
  )
  logits = tf.keras.layers.Dense(
      num_classes, kernel_initializer=_glorot(seed + 22)
  )(hidden)
  return tf.keras.Model(inputs, logits)


class BatchStatsNormalization(tf.keras.layers.Layer):
  """Batch normalization by the batch's own moments, in training and eval.

  `gamma * (x - mean) / sqrt(var + 1e-3) + beta`, mean and (biased)
  variance over every axis but the last, of the batch at hand: what LEAF's
  `tf.layers.batch_normalization(out, training=True)` computes in training
  and in evaluation alike (its moving averages are never read). No moving
  averages here, so the model's only variables are trainable ones.
  """

  def build(self, input_shape):
    channels = input_shape[-1]
    self.gamma = self.add_weight(
        name='gamma', shape=[channels], initializer='ones'
    )
    self.beta = self.add_weight(
        name='beta', shape=[channels], initializer='zeros'
    )
    super().build(input_shape)

  def call(self, inputs):
    axes = list(range(len(inputs.shape) - 1))
    mean, variance = tf.nn.moments(inputs, axes)
    return tf.nn.batch_normalization(
        inputs, mean, variance, self.beta, self.gamma, BATCH_NORM_EPSILON
    )


def celeba_cnn(image_size: int, num_classes: int, seed: int) -> tf.keras.Model:
  """LEAF's CelebA CNN (`models/celeba/cnn.py`), in Keras.

  float32 images `[batch, image_size, image_size, 3]` (values 0..255, as
  LEAF feeds them) -> 4 x (conv 32 3x3 'same' -> `BatchStatsNormalization`
  -> max pool 2x2 stride 2 'same' -> ReLU) -> flatten -> dense
  `num_classes` logits. For 84x84 images and 2 classes: 84 -> 42 -> 21 ->
  11 -> 6, so 6 * 6 * 32 = 1152 features; parameters `(27 * 32 + 32) + 3 *
  (288 * 32 + 32) + 4 * 64 + 1152 * 2 + 2` = 31,202.
  """
  inputs = tf.keras.Input([image_size, image_size, 3], dtype=tf.float32)
  hidden = inputs
  for i in range(4):
    hidden = tf.keras.layers.Conv2D(
        CELEBA_FILTERS, 3, padding='same', kernel_initializer=_glorot(seed + i)
    )(hidden)
    hidden = BatchStatsNormalization()(hidden)
    hidden = tf.keras.layers.MaxPool2D(2, 2, padding='same')(hidden)
    hidden = tf.keras.layers.ReLU()(hidden)
  hidden = tf.keras.layers.Flatten()(hidden)
  logits = tf.keras.layers.Dense(
      num_classes, kernel_initializer=_glorot(seed + 4)
  )(hidden)
  return tf.keras.Model(inputs, logits)


def reddit_stacked_lstm(
    vocab_size: int, seq_length: int, seed: int
) -> tf.keras.Model:
  """LEAF's Reddit model (`models/reddit/stacked_lstm.py`), in Keras.

  int32 token ids `[batch, seq_length]` -> an embedding `[vocab_size, 256]`
  -> two LSTMs of 256 units returning sequences -> dense `vocab_size`
  logits at every position: LEAF's `embedding`, `MultiRNNCell` of two
  `LSTMBlockCell(256, forget_bias=0.0)` (so no forget-gate bias here
  either), `softmax_w`, `softmax_b`; every variable uniform in [-0.1, 0.1]
  (its `init_scale`), seeded. Parameters: `256 V + 2 * (4 * 256 * 512 + 4 *
  256) + 256 V + V` = `513 V + 1,050,624` for `V` ids.

  Not reproduced: LEAF carries the LSTM state from one sequence of a
  comment to the next within a batch loop, and clips the gradients' global
  norm at 5; here each 10-token sequence starts from a zero state, and the
  client optimizer is this package's.
  """
  checks.check_int('vocab_size', vocab_size, minimum=1)
  uniform = lambda i: tf.keras.initializers.RandomUniform(
      -REDDIT_INIT_SCALE, REDDIT_INIT_SCALE, seed=seed + i
  )
  inputs = tf.keras.Input([seq_length], dtype=tf.int32)
  hidden = tf.keras.layers.Embedding(
      vocab_size, REDDIT_HIDDEN, embeddings_initializer=uniform(0)
  )(inputs)
  for i in range(2):
    hidden = tf.keras.layers.LSTM(
        REDDIT_HIDDEN,
        return_sequences=True,
        unit_forget_bias=False,
        kernel_initializer=uniform(1 + 3 * i),
        recurrent_initializer=uniform(2 + 3 * i),
        bias_initializer=uniform(3 + 3 * i),
    )(hidden)
  logits = tf.keras.layers.Dense(
      vocab_size, kernel_initializer=uniform(7), bias_initializer=uniform(8)
  )(hidden)
  return tf.keras.Model(inputs, logits)
