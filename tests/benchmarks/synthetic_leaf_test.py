"""Tests for benchmarks.synthetic_leaf: a FEMNIST-shaped LEAF dir."""

import glob
import json
import os

import numpy as np
import pytest

from benchmarks import synthetic_leaf
from tff_fedwin.data import leaf_cache


def _read_split(root, split):
  users = {}
  for path in sorted(glob.glob(os.path.join(root, split, '*.json'))):
    with open(path) as f:
      data = json.load(f)
    for user, n in zip(data['users'], data['num_samples']):
      record = data['user_data'][user]
      assert len(record['x']) == len(record['y']) == n
      users[user] = record
  return users


def test_writes_leafs_layout_split_by_sample(tmp_path):
  written = synthetic_leaf.write_synthetic_femnist(
      str(tmp_path / 'leaf'),
      num_users=5,
      num_examples=60,
      num_files=2,
      pool_rows=3,
  )
  assert len(os.listdir(tmp_path / 'leaf' / 'train')) == 2
  train = _read_split(written.root, 'train')
  test = _read_split(written.root, 'test')
  assert sorted(train) == sorted(test) and len(train) == 5  # By sample.
  sizes = {u: len(train[u]['y']) + len(test[u]['y']) for u in train}
  assert sum(sizes.values()) == 60
  for user, n in sizes.items():
    # LEAF's split_data.py: max(1, int(0.9 n)) train, the rest test (>= 1).
    assert len(train[user]['y']) == max(1, int(0.9 * n))
    assert len(test[user]['y']) >= 1
  x = np.array([row for u in train for row in train[u]['x']])
  assert x.shape == (written.num_train_examples, 784)
  # Pixels are k / 255 and mostly background 1.0.
  np.testing.assert_array_equal(x * 255, np.round(x * 255))
  assert 0.6 < np.mean(x == 1.0) < 0.95
  y = np.array([label for u in train for label in train[u]['y']])
  assert y.min() >= 0 and y.max() < 62
  assert written.json_bytes == sum(
      os.path.getsize(p)
      for p in glob.glob(os.path.join(written.root, '*', '*.json'))
  )


def test_the_loader_reads_it(tmp_path):
  written = synthetic_leaf.write_synthetic_femnist(
      str(tmp_path / 'leaf'), num_users=4, num_examples=30, num_files=3
  )
  cache = leaf_cache.load_leaf_cache(
      written.root, cache_dir=str(tmp_path / 'c')
  )
  assert cache.kind == 'femnist' and len(cache.client_ids) == 4
  assert sum(cache.num_examples) == written.num_train_examples
  assert cache.num_test_examples == written.num_test_examples
  assert synthetic_leaf.directory_bytes(cache.directory) > 30 * 784 * 4


def test_sizes_that_do_not_fit_are_one_line(tmp_path):
  with pytest.raises(ValueError, match=r'num_examples >= 2 \* num_users'):
    synthetic_leaf.write_synthetic_femnist(
        str(tmp_path), num_users=10, num_examples=15
    )
