"""Tests for tff_fedwin.data.sources: offline MNIST loading."""

import gzip
import pickle

import numpy as np
import pytest

from tff_fedwin import data

# Per-class counts of the official MNIST test set (LeCun et al.), and the first
# labels of the official training and test files: the 50k train split of
# mnist.pkl.gz is the first 50k of the official training set.
_MNIST_TEST_CLASS_COUNTS = [
    980,
    1135,
    1032,
    1010,
    982,
    892,
    958,
    1028,
    974,
    1009,
]
_MNIST_FIRST_TRAIN_LABELS = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
_MNIST_FIRST_TEST_LABELS = [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]


@pytest.fixture(scope='module')
def mnist():
  (x_train, y_train), (x_test, y_test) = data.load_mnist()
  return dict(train=(x_train, y_train), test=(x_test, y_test))


@pytest.mark.parametrize('split, size', [('train', 50000), ('test', 10000)])
def test_mnist_shapes_and_dtypes(mnist, split, size):
  x, y = mnist[split]
  assert x.shape == (size, 28, 28, 1)
  assert x.dtype == np.float32
  assert y.shape == (size,)
  assert y.dtype == np.int32


@pytest.mark.parametrize('split, index', [('train', 0), ('test', 2)])
def test_mnist_pixels_are_the_files_pixel_levels(mnist, split, index):
  # mnist.pkl.gz stores float32 pixels k / 256 for the byte levels k = 0..255
  # (not v / 255): read here independently, every level occurs, 0.0 and
  # 255 / 256 = 0.99609375 are the extremes, and load_mnist returns the
  # file's values unchanged.
  with gzip.open(data.mnist_path(), 'rb') as f:
    file_images, _ = pickle.load(f, encoding='latin1')[index]
  x, _ = mnist[split]
  np.testing.assert_array_equal(x.reshape(len(x), 784), file_images)
  levels = np.unique(x) * 256
  np.testing.assert_array_equal(levels, np.arange(256))
  assert x.min() == 0.0
  assert x.max() == np.float32(255 / 256) == np.float32(0.99609375)


@pytest.mark.parametrize('split', ['train', 'test'])
def test_mnist_labels_are_digits(mnist, split):
  _, y = mnist[split]
  assert set(np.unique(y).tolist()) == set(range(10))


@pytest.mark.parametrize(
    'split, first_labels',
    [('train', _MNIST_FIRST_TRAIN_LABELS), ('test', _MNIST_FIRST_TEST_LABELS)],
)
def test_mnist_splits_are_the_official_ones(mnist, split, first_labels):
  _, y = mnist[split]
  np.testing.assert_array_equal(y[:10], first_labels)


def test_mnist_test_split_has_official_class_counts(mnist):
  _, y = mnist['test']
  np.testing.assert_array_equal(
      np.bincount(y, minlength=10), _MNIST_TEST_CLASS_COUNTS
  )


def test_mnist_validation_split_is_the_files_second_split():
  # Read the pickle here, independently: (train, validation, test).
  with gzip.open(data.mnist_path(), 'rb') as f:
    _, (file_images, file_labels), _ = pickle.load(f, encoding='latin1')
  (x_train, _), (x_val, y_val) = data.load_mnist(held_out='validation')
  assert x_train.shape == (50000, 28, 28, 1)
  assert x_val.shape == (10000, 28, 28, 1) and x_val.dtype == np.float32
  assert y_val.dtype == np.int32
  np.testing.assert_array_equal(y_val, file_labels)
  np.testing.assert_array_equal(x_val.reshape(10000, 784), file_images)


def test_mnist_validation_split_is_not_the_test_split(mnist):
  (_, _), (x_val, y_val) = data.load_mnist(held_out='validation')
  x_test, y_test = mnist['test']
  assert not np.array_equal(y_val, y_test)
  assert not np.array_equal(x_val[:10], x_test[:10])


def test_mnist_refuses_an_unknown_held_out_split():
  with pytest.raises(ValueError, match="`held_out` must be one of.*'train'"):
    data.load_mnist(held_out='train')
