"""The papers' image models by name, for the image tasks' `--model`.

`create_image_model(name, input_shape, num_classes, seed)` builds one of
`IMAGE_MODELS`; every model outputs logits (no softmax; WSM and the tasks'
plain cross-entropy need them, docs/design.md sec. 2.3) and is a function of
`seed` (seeded initializers). `check_image_model` says in one line why a name
or an input shape does not fit, before any model or TFF work.

* `cnn` (default): the small CNN the `mnist` and `npz` tasks have always used
  (`create_small_cnn`); an MLP for 1-D inputs.
* `cnn_dropout`: EMNIST's `cnn_dropout` of Reddi et al. 2021
  (`tff_fedwin.tasks.emnist`), for any image of at least 28x28.
* `leaf_cnn`: LEAF's FEMNIST CNN (Caldas et al. 2018, `models/femnist/cnn.py`
  of the LEAF repository).
* `ima_cnn`: the IMA paper's CNN for FMNIST and CIFAR-10 (Appendix Table 4).
* `resnet18_gn`, `resnet20_gn`: CIFAR ResNets with group normalization
  (WSM and IMA: ResNet-18; WiMA: ResNet-20), in `tff_fedwin.tasks.resnet_gn`.
"""

from collections.abc import Sequence

import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin import errors
from tff_fedwin.tasks import emnist
from tff_fedwin.tasks import resnet_gn

IMAGE_MODELS = choices.IMAGE_MODELS
DEFAULT_IMAGE_MODEL = 'cnn'
# The smallest height and width each convolutional model takes (see
# `check_image_model`); `cnn` takes any size.
MIN_IMAGE_SIZE = {
    'cnn': 1,
    'cnn_dropout': 28,
    'leaf_cnn': 4,
    'ima_cnn': 16,
    'resnet18_gn': 1,
    'resnet20_gn': 1,
}


class ImageModelError(errors.InputError):
  """A `--model` name or an input shape the model cannot take (one line)."""


def create_small_cnn(
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


def _with_channel(input_shape, layers) -> tf.keras.Sequential:
  """`layers` after an input of `input_shape`; (h, w) gets a channel."""
  first = [tf.keras.layers.InputLayer(input_shape=tuple(input_shape))]
  if len(input_shape) == 2:
    first.append(tf.keras.layers.Reshape((*input_shape, 1)))
  return tf.keras.Sequential(first + layers)


def create_cnn_dropout(
    input_shape: tuple[int, ...], num_classes: int, seed: int = 0
) -> tf.keras.Model:
  """EMNIST's `cnn_dropout` (Reddi et al. 2021) for any image >= 28x28.

  `tff_fedwin.tasks.emnist.create_cnn_dropout_model` built for
  `input_shape`: two 3x3 'valid' convolutions (32, 64 channels, ReLU), 2x2
  max-pooling, dropout 0.25, dense 128 (ReLU), dropout 0.5, dense logits;
  1,206,590 parameters for 28x28x1 and 62 classes. A `(h, w)` input gets a
  channel first.
  """
  shape = tuple(input_shape)
  if len(shape) == 3:
    return emnist.create_cnn_dropout_model(num_classes, seed, shape)
  inner = emnist.create_cnn_dropout_model(num_classes, seed, (*shape, 1))
  return tf.keras.Sequential(
      [tf.keras.layers.Reshape((*shape, 1), input_shape=shape), inner]
  )


def create_leaf_cnn(
    input_shape: tuple[int, ...], num_classes: int, seed: int = 0
) -> tf.keras.Model:
  """LEAF's FEMNIST CNN (Caldas et al. 2018; LEAF `models/femnist/cnn.py`).

  Conv 5x5 32 'same' ReLU -> max-pool 2x2 stride 2 -> conv 5x5 64 'same'
  ReLU -> max-pool 2x2 stride 2 -> dense 2048 ReLU -> dense logits, as LEAF's
  TensorFlow model; 6,603,710 parameters for 28x28x1 and 62 classes.
  """
  init = lambda i: tf.keras.initializers.GlorotUniform(seed=seed + i)
  return _with_channel(
      input_shape,
      [
          tf.keras.layers.Conv2D(
              32,
              5,
              padding='same',
              activation='relu',
              kernel_initializer=init(0),
          ),
          tf.keras.layers.MaxPool2D(2, strides=2),
          tf.keras.layers.Conv2D(
              64,
              5,
              padding='same',
              activation='relu',
              kernel_initializer=init(1),
          ),
          tf.keras.layers.MaxPool2D(2, strides=2),
          tf.keras.layers.Flatten(),
          tf.keras.layers.Dense(
              2048, activation='relu', kernel_initializer=init(2)
          ),
          tf.keras.layers.Dense(num_classes, kernel_initializer=init(3)),
      ],
  )


def create_ima_cnn(
    input_shape: tuple[int, ...], num_classes: int, seed: int = 0
) -> tf.keras.Model:
  """The IMA paper's CNN for FMNIST and CIFAR-10 (Appendix D, Table 4).

  The paper (Appendix D, "Models"; sec. 7.1.2): "a CNN model consisting
  of two 5x5 convolutional layers followed by 2x2 max pooling and two fully
  connected layers with ReLU activation", as in McMahan et al. 2017 and FedFA.
  Table 4 gives two variants, here chosen by the input's channels:

  * FMNIST (1 channel): Conv2d(1, 32, 5) ReLU MaxPool(2, 2); a second conv
    printed "Conv2d(1, 32, 5)", read as Conv2d(32, 32, 5) since FC(512, 384)
    follows (28 -> 24 -> 12 -> 8 -> 4, 4 * 4 * 32 = 512); FC(512, 384) ReLU;
    FC(384, 128); FC(128, 10).
  * CIFAR-10 (3 channels, or any other count): Conv2d(3, 64, 5) ReLU
    MaxPool(2, 2); Conv2d(64, 64, 5) ReLU MaxPool(2, 2); FC(1600, 384) ReLU;
    FC(384, 128); FC(128, 10) (32 -> 28 -> 14 -> 10 -> 5, 5 * 5 * 64 = 1600).

  So convolutions are 'valid' (no padding), which the FC input sizes confirm.
  Table 4 prints no ReLU after FC(384, 128); the text's "two fully connected
  layers with ReLU" puts one there, and so does this model (without it,
  FC(384, 128) and FC(128, 10) would compose into one linear map). No
  normalization layers (Table 4 lists none for these CNNs). Parameters for 10
  classes: 274,026 (28x28x1), 772,682 (32x32x3), derived in
  tests/tasks/image_models_test.py.
  """
  init = lambda i: tf.keras.initializers.GlorotUniform(seed=seed + i)
  grayscale = len(input_shape) == 2 or input_shape[-1] == 1
  filters = 32 if grayscale else 64
  return _with_channel(
      input_shape,
      [
          tf.keras.layers.Conv2D(
              filters, 5, activation='relu', kernel_initializer=init(0)
          ),
          tf.keras.layers.MaxPool2D(2, strides=2),
          tf.keras.layers.Conv2D(
              filters, 5, activation='relu', kernel_initializer=init(1)
          ),
          tf.keras.layers.MaxPool2D(2, strides=2),
          tf.keras.layers.Flatten(),
          tf.keras.layers.Dense(
              384, activation='relu', kernel_initializer=init(2)
          ),
          tf.keras.layers.Dense(
              128, activation='relu', kernel_initializer=init(3)
          ),
          tf.keras.layers.Dense(num_classes, kernel_initializer=init(4)),
      ],
  )


_BUILDERS = {
    'cnn': create_small_cnn,
    'cnn_dropout': create_cnn_dropout,
    'leaf_cnn': create_leaf_cnn,
    'ima_cnn': create_ima_cnn,
    'resnet18_gn': resnet_gn.create_resnet18_gn,
    'resnet20_gn': resnet_gn.create_resnet20_gn,
}


def check_image_model(name: str, input_shape: Sequence[int]) -> None:
  """Raises `ImageModelError` if model `name` cannot take `input_shape`.

  Args:
    name: The `--model` value; one of `IMAGE_MODELS`.
    input_shape: One example's feature shape, e.g. `(32, 32, 3)`, `(28, 28)`
      (a channel is added) or `(64,)` (1-D: `cnn` only, as an MLP).

  Raises:
    ImageModelError: one line naming `--model`, if `name` is unknown, the
      shape is not 1-D (for `cnn`), `(h, w)` or `(h, w, c)` with positive
      sizes, or the image is smaller than `MIN_IMAGE_SIZE[name]`.
  """
  if name not in IMAGE_MODELS:
    raise ImageModelError(
        f'--model must be one of {", ".join(IMAGE_MODELS)}, got {name!r}.'
    )
  shape = tuple(int(d) for d in input_shape)
  ranks = (1, 2, 3) if name == 'cnn' else (2, 3)
  if len(shape) not in ranks or min(shape, default=0) < 1:
    wanted = ' or '.join(
        {
            1: '(features,)',
            2: '(height, width)',
            3: '(height, width, channels)',
        }[r]
        for r in ranks
    )
    raise ImageModelError(
        f'--model={name} takes inputs shaped {wanted} with positive sizes; '
        f'the data has examples shaped {shape}.'
    )
  smallest = MIN_IMAGE_SIZE[name]
  if len(shape) > 1 and min(shape[:2]) < smallest:
    raise ImageModelError(
        f'--model={name} needs images of at least {smallest}x{smallest}; the '
        f'data has {shape[0]}x{shape[1]}.'
    )


def create_image_model(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int = 0,
) -> tf.keras.Model:
  """Builds image model `name` (one of `IMAGE_MODELS`) for `input_shape`.

  Args:
    name: The model's name, one of `IMAGE_MODELS`.
    input_shape: One example's feature shape (see `check_image_model`).
    num_classes: The number of logits, >= 1.
    seed: Seeds every initializer (and `cnn_dropout`'s dropout).

  Returns:
    A `tf.keras.Model` mapping `[batch, *input_shape]` float32 to logits
    `[batch, num_classes]`.

  Raises:
    ImageModelError: see `check_image_model`.
    ValueError: if `num_classes` is not a positive integer.
  """
  check_image_model(name, input_shape)
  num_classes = checks.check_int('num_classes', num_classes, minimum=1)
  shape = tuple(int(d) for d in input_shape)
  return _BUILDERS[name](shape, num_classes, seed)
