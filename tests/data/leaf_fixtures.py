"""Small LEAF directories written by the tests (LEAF's JSON layout)."""

import json
import os

import numpy as np

from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_kinds

# Shakespeare rows: 80 characters of LEAF's ALL_LETTERS.
LINE_A = 'To be, or not to be: that is the question.\n' + 'a' * 37
LINE_B = 'A' * 79 + '}'


def femnist_rows(n: int, seed: int) -> list[list[float]]:
  """`n` rows of 784 floats, written as Python floats like LEAF's.

  Values k / 255 (what LEAF's preprocessing writes) and a few exact ones.
  """
  rng = np.random.default_rng(seed)
  rows = (rng.integers(0, 256, size=(n, 784)) / 255.0).tolist()
  for row in rows:
    row[0], row[1], row[783] = 1.0, 0.5, 0.0
  return rows


def write_leaf_json(
    path, user_data, *, users=None, num_samples=None, hierarchies=None
):
  """Writes `{"users", "num_samples", "user_data"}` for `{user: (x, y)}`."""
  if users is None:
    users = list(user_data)
  if num_samples is None:
    num_samples = [len(user_data[u][0]) if u in user_data else 0 for u in users]
  data = {
      'users': users,
      'num_samples': num_samples,
      'user_data': {u: {'x': x, 'y': y} for u, (x, y) in user_data.items()},
  }
  if hierarchies is not None:
    data['hierarchies'] = hierarchies
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    json.dump(data, f)
  return str(path)


def write_leaf_dir(root, train_files, test_files):
  """Writes `root/train/<name>` and `root/test/<name>` from `{name: data}`."""
  for split, files in (('train', train_files), ('test', test_files)):
    os.makedirs(os.path.join(root, split), exist_ok=True)
    for name, user_data in files.items():
      write_leaf_json(os.path.join(root, split, name), user_data)
  return str(root)


def femnist_by_sample(root):
  """FEMNIST-style, LEAF's split by sample: the same 3 users in both.

  Returns:
    (root, {user: (x, y)} train, {user: (x, y)} test), the lists written.
  """
  train = {
      'f0001_07': (femnist_rows(3, 1), [0, 61, 5]),
      'f0002_11': (femnist_rows(2, 2), [7, 7]),
      'f0000_03': (femnist_rows(1, 3), [36]),
  }
  test = {
      'f0001_07': (femnist_rows(1, 4), [61]),
      'f0002_11': (femnist_rows(1, 5), [0]),
      'f0000_03': (femnist_rows(2, 6), [3, 4]),
  }
  write_leaf_dir(
      root,
      {
          'all_data_0_niid_0_keep_0_train_9.json': {
              k: train[k] for k in ('f0001_07', 'f0002_11')
          },
          'all_data_1_niid_0_keep_0_train_9.json': {
              'f0000_03': train['f0000_03']
          },
      },
      {'all_data_0_niid_0_keep_0_test_9.json': test},
  )
  return str(root), train, test


def shakespeare_by_user(root):
  """Shakespeare-style, LEAF's split by user: disjoint train/test users."""
  train = {
      'THE_TEMPEST_PROSPERO': ([LINE_A, LINE_B], ['b', '\n']),
      'HAMLET_HAMLET': ([LINE_B], ['}']),
  }
  test = {'KING_LEAR_EDMUND': ([LINE_A], [' '])}
  write_leaf_dir(
      root,
      {'all_data_niid_0_keep_0_train_9.json': train},
      {'all_data_niid_0_keep_0_test_9.json': test},
  )
  return str(root), train, test


# LEAF directories written by LEAF's own preprocess.sh (its README.md).
GENERATED_DIR = os.path.join(os.path.dirname(__file__), 'leaf_generated')


def generated_json(name: str, split: str) -> dict:
  """The one JSON file LEAF's scripts wrote for `GENERATED_DIR/name/split`."""
  directory = os.path.join(GENERATED_DIR, name, split)
  (file_name,) = os.listdir(directory)
  with open(os.path.join(directory, file_name)) as f:
    return json.load(f)


def load_generated(name_or_root, cache_dir, **options):
  """`leaf_cache.load_leaf_cache` of a generated directory (its name here, or
  a path) with `leaf_kinds.LeafOptions(**options)`."""
  root = name_or_root
  if not os.path.isabs(root):
    root = os.path.join(GENERATED_DIR, root)
  return leaf_cache.load_leaf_cache(
      root, cache_dir=str(cache_dir), options=leaf_kinds.LeafOptions(**options)
  )
