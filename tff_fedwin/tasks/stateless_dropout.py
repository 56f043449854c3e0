"""Dropout masks as a pure function of the run seed, the layer and its input.

Keras' `Dropout(rate, seed=s)` draws its masks from stateful random kernels,
so two runs of the same flags, or a run and its resume, draw other masks.
`StatelessDropout` draws each mask with `tf.nn.experimental.stateless_dropout`
from the seed

    fold_in((run seed, stream), fingerprint(layer input))

(`mask_seed`): a function of (run seed, round, client, local step, layer)
with no state, the same in any worker, in any order, on a resume. Why, and
what follows: docs/design.md sec. 5.4 ("Dropout is exact too").
"""

from typing import Any

import tensorflow as tf


def mask_seed(inputs: tf.Tensor, seed: int, stream: int) -> tf.Tensor:
  """The int64 [2] stateless seed of the mask applied to `inputs`.

  `tf.random.experimental.stateless_fold_in((seed, stream), f)`, f the
  farmhash64 fingerprint (`tf.fingerprint`) of `inputs`' bytes read as one
  row, as an int64.

  Args:
    inputs: The layer's input, any shape and numeric dtype.
    seed: The run seed.
    stream: The layer's index among the model's dropout layers.
  """
  flat = tf.reshape(inputs, [1, -1])
  content = tf.bitcast(tf.fingerprint(flat)[0], tf.int64)
  base = tf.constant([seed, stream], tf.int64)
  return tf.random.experimental.stateless_fold_in(base, content)


@tf.keras.utils.register_keras_serializable(package='tff_fedwin')
class StatelessDropout(tf.keras.layers.Layer):
  """Inverted dropout with the mask seeded by `mask_seed`; no state.

  In training each value is kept with probability 1 - `rate` and scaled by
  1 / (1 - `rate`), as `tf.keras.layers.Dropout`; outside training it is the
  identity.
  """

  def __init__(self, rate: float, seed: int = 0, stream: int = 0, **kwargs):
    """Initializes the layer.

    Args:
      rate: The fraction dropped, in [0, 1).
      seed: The run seed.
      stream: Distinct per dropout layer of a model.
      **kwargs: `tf.keras.layers.Layer`'s arguments.

    Raises:
      ValueError: If `rate` is outside [0, 1).
    """
    super().__init__(**kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f'`rate` must be in [0, 1), got {rate!r}.')
    self.rate = float(rate)
    self.seed = int(seed)
    self.stream = int(stream)

  def _dropped(self, inputs: tf.Tensor) -> tf.Tensor:
    return tf.nn.experimental.stateless_dropout(
        inputs, rate=self.rate, seed=mask_seed(inputs, self.seed, self.stream)
    )

  def call(self, inputs: tf.Tensor, training: Any = None) -> tf.Tensor:
    if training is None:
      training = tf.keras.backend.learning_phase()
    if isinstance(training, (bool, int)):
      return self._dropped(inputs) if training else tf.identity(inputs)
    return tf.cond(
        tf.cast(training, tf.bool),
        lambda: self._dropped(inputs),
        lambda: tf.identity(inputs),
    )

  def get_config(self) -> dict[str, Any]:
    return dict(
        super().get_config(), rate=self.rate, seed=self.seed, stream=self.stream
    )
