"""Fixtures shared by the script tests."""

import numpy as np
import pytest


@pytest.fixture(scope='module')
def data_npz(tmp_path_factory):
  """A tiny `.npz` task: 60 train / 20 test random 8x8 images, 10 classes."""
  rng = np.random.default_rng(3)
  path = str(tmp_path_factory.mktemp('data') / 'tiny.npz')
  y_train, y_test = np.arange(60) % 10, np.arange(20) % 10
  np.savez(
      path,
      x_train=rng.random((60, 8, 8), dtype=np.float32),
      y_train=y_train,
      x_test=rng.random((20, 8, 8), dtype=np.float32),
      y_test=y_test,
  )
  return path
