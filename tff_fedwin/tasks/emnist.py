"""The EMNIST-62 character recognition CNN used by the papers' TFF baselines.

`create_cnn_dropout_model` is the `cnn_dropout` model of
google-research/federated (`utils/models/emnist_models.
create_conv_dropout_model`, Reddi et al. 2021): two 3x3 convolutions (32, 64),
2x2 max-pooling, dropout 0.25, dense 128, dropout 0.5, dense `num_classes`
logits; 1,206,590 parameters for 62 classes.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_fedwin.tasks import stateless_dropout

IMAGE_SHAPE = (28, 28, 1)


def create_cnn_dropout_model(
    num_classes: int = 62,
    seed: int = 0,
    input_shape: tuple[int, ...] = IMAGE_SHAPE,
) -> tf.keras.Model:
  """Keras CNN with logits output (no softmax); deterministic with `seed`.

  Args:
    num_classes: The number of logits.
    seed: Seeds the kernel initializers and the dropout masks (stateless:
      `stateless_dropout.StatelessDropout`, one stream per layer).
    input_shape: `(height, width, channels)` of the images; EMNIST's by
      default. The model is built for it as it is, so images other than
      28x28x1 get a wider first convolution (channels) and dense layer.

  Returns:
    A built `tf.keras.Sequential` outputting logits.
  """
  init = lambda i: tf.keras.initializers.GlorotUniform(seed=seed + i)
  return tf.keras.Sequential(
      [
          tf.keras.layers.Conv2D(
              32,
              3,
              activation='relu',
              input_shape=tuple(input_shape),
              kernel_initializer=init(0),
          ),
          tf.keras.layers.Conv2D(
              64, 3, activation='relu', kernel_initializer=init(1)
          ),
          tf.keras.layers.MaxPool2D(2),
          stateless_dropout.StatelessDropout(0.25, seed, stream=0),
          tf.keras.layers.Flatten(),
          tf.keras.layers.Dense(
              128, activation='relu', kernel_initializer=init(2)
          ),
          stateless_dropout.StatelessDropout(0.5, seed, stream=1),
          tf.keras.layers.Dense(num_classes, kernel_initializer=init(3)),
      ]
  )


def emnist_input_spec() -> collections.OrderedDict:
  """Batches of OrderedDict(x=float32[b, 28, 28, 1], y=int32[b])."""
  return collections.OrderedDict(
      x=tf.TensorSpec([None, *IMAGE_SHAPE], tf.float32),
      y=tf.TensorSpec([None], tf.int32),
  )


def synthetic_client_datasets(
    num_clients: int,
    examples_per_client: int,
    batch_size: int,
    num_classes: int = 62,
    seed: int = 0,
) -> list[tf.data.Dataset]:
  """Random images and labels shaped like EMNIST (smoke tests, benchmarks)."""
  rng = np.random.default_rng(seed)
  datasets = []
  for _ in range(num_clients):
    x = rng.random((examples_per_client, *IMAGE_SHAPE), np.float32)
    y = rng.integers(0, num_classes, examples_per_client).astype(np.int32)
    datasets.append(
        tf.data.Dataset.from_tensor_slices(
            collections.OrderedDict(x=x, y=y)
        ).batch(batch_size)
    )
  return datasets
