"""The small valid `.npz` arrays the tff_fedwin.data.sources tests write."""

import numpy as np


def npz_arrays():
  rng = np.random.default_rng(0)
  return dict(
      x_train=rng.normal(size=[6, 3]).astype(np.float32),
      y_train=np.array([0, 1, 2, 0, 1, 2], np.int64),
      x_test=rng.normal(size=[2, 3]).astype(np.float32),
      y_test=np.array([2, 0], np.int64),
  )
