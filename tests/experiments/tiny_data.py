"""A tiny learnable image task as an `.npz` for whole-run tests (`--task=npz`).

200 train / 50 test random 8x8 images (28x28 for `cnn_dropout`), 10 classes, every class present; the
brightness depends on the class, so the task is learnable at all.
"""

import numpy as np

from tff_fedwin import experiments

NUM_TRAIN = 200
NUM_TEST = 50
IMAGE_SHAPE = (8, 8)
NUM_CLASSES = 10


# The smallest images `cnn_dropout` (the model with dropout) takes.
DROPOUT_IMAGE_SHAPE = (28, 28)


def write_npz(path: str, image_shape: tuple[int, int] = IMAGE_SHAPE) -> str:
  """Writes the task (images of `image_shape`) to `path`; returns `path`."""
  rng = np.random.default_rng(7)
  y_train = np.arange(NUM_TRAIN) % NUM_CLASSES
  y_test = np.arange(NUM_TEST) % NUM_CLASSES
  x_train = rng.random((NUM_TRAIN, *image_shape)) + y_train[:, None, None] / 5
  x_test = rng.random((NUM_TEST, *image_shape)) + y_test[:, None, None] / 5
  np.savez(
      path,
      x_train=x_train.astype(np.float32),
      y_train=y_train,
      x_test=x_test.astype(np.float32),
      y_test=y_test,
  )
  return path


def config(data_npz: str, output_dir, name: str, **overrides):
  """An `ExperimentConfig` on the task: 6 clients, 2 per round, batch 10.

  Client lr 0.05, a checkpoint every round; `overrides` change any field.
  """
  kwargs = dict(
      task='npz',
      data_npz=data_npz,
      num_clients=6,
      dirichlet_alpha=1.0,
      clients_per_round=2,
      client_batch_size=10,
      client_learning_rate=0.05,
      rounds_per_checkpoint=1,
      root_output_dir=str(output_dir),
      experiment_name=name,
  )
  kwargs.update(overrides)
  return experiments.ExperimentConfig(**kwargs)
