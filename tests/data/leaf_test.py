"""Tests for tff_fedwin.data.leaf{,_cache,_client_data}: LEAF JSON -> clients.

Fixtures (`leaf_fixtures`) write a few users in LEAF's layout; every array is
compared with numpy's reading of the lists written, or with ids by hand.
"""

import os

import numpy as np
import pytest

from tests.data import leaf_fixtures
from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_client_data


def _arrays(dataset):
  elements = list(dataset.as_numpy_iterator())
  return (
      np.stack([e['x'] for e in elements]),
      np.array([e['y'] for e in elements]),
  )


def _load(root, tmp_path, kind='auto'):
  cache = leaf_cache.load_leaf_cache(root, kind, str(tmp_path / 'cache'))
  return cache, leaf_client_data.LeafClientData(cache)


def test_all_letters_is_leafs_80_characters():
  # LEAF's models/utils/language_utils.py: '\n', ' ', '!', '"', '&', "'",
  # '(', ')', ',', '-', '.', digits, ':', ';', '>', '?', A-Z, '[', ']',
  # a-z, '}': 11 + 10 + 4 + 26 + 2 + 26 + 1 = 80.
  assert len(leaf.ALL_LETTERS) == 80
  assert leaf.ALL_LETTERS.index('A') == 25
  assert leaf.ALL_LETTERS.index('a') == 53
  assert leaf.ALL_LETTERS[-1] == '}'
  ids, unknown = leaf.encode_letters(leaf.ALL_LETTERS)
  np.testing.assert_array_equal(ids, np.arange(1, 81))
  assert unknown == 0


# LEAF's models/utils/language_utils.py, verbatim but for names: how LEAF's
# reader maps x (`word_to_indices`) and y (`letter_to_vec`).
def _leaf_word_to_indices(word):
  return [leaf.ALL_LETTERS.find(c) for c in word]


def _leaf_letter_to_vec(letter):
  vec = [0] * len(leaf.ALL_LETTERS)
  vec[int(leaf.ALL_LETTERS.find(letter))] = 1
  return vec


def test_what_leafs_reader_accepts_is_read_as_it_reads_it(tmp_path, caplog):
  # A curly apostrophe (U+2019) and a '#' are outside ALL_LETTERS; num_samples
  # says 5 for 2 rows (LEAF's by-sample split does that); b.json has no user.
  odd_x = 'a' * 10 + '\u2019' + 'a' * 68 + '#'
  root = leaf_fixtures.write_leaf_dir(
      tmp_path / 'leaf', {}, {'t.json': {'u9': ([leaf_fixtures.LINE_A], ['a'])}}
  )
  leaf_fixtures.write_leaf_json(
      f'{root}/train/a.json',
      {'u1': ([leaf_fixtures.LINE_A, odd_x], ['a', '\u2019'])},
      num_samples=[5],
  )
  leaf_fixtures.write_leaf_json(f'{root}/train/b.json', {})
  cache, client_data = _load(root, tmp_path)
  x, y = _arrays(client_data.create_tf_dataset_for_client('u1'))
  # Our ids are 1 + LEAF's index: x's unknown characters -1 + 1 = 0; y's is
  # LEAF's one-hot at index -1, the last letter '}', id 80.
  for row, text in zip(x, [leaf_fixtures.LINE_A, odd_x]):
    np.testing.assert_array_equal(row, np.add(_leaf_word_to_indices(text), 1))
  assert x[1, 10] == 0 and x[1, 79] == 0
  expected_y = [np.argmax(_leaf_letter_to_vec(c)) + 1 for c in ['a', '\u2019']]
  assert y.tolist() == expected_y == [54, 80]
  assert cache.num_examples == (2,)
  assert [line.split(' (')[0] for line in cache.warnings] == [
      '1 LEAF user(s) have a "num_samples" other than their number of x rows',
      '1 LEAF file(s) with "users": [] skipped',
      "2 x character(s) and 1 y character(s) are outside LEAF's Shakespeare "
      "ALL_LETTERS: read as LEAF's reader reads them",
  ]
  assert cache.warnings[1].endswith('every user): ' + f'{root}/train/b.json')
  # A second start reads the cache and warns again, once per line.
  caplog.clear()
  with caplog.at_level('WARNING'):
    assert not _load(root, tmp_path)[0].converted
  assert [r.getMessage() for r in caplog.records] == [
      f'{root}: {line}' for line in cache.warnings
  ]


def test_femnist_split_by_sample(tmp_path):
  root, train, test = leaf_fixtures.femnist_by_sample(tmp_path / 'leaf')
  cache, client_data = _load(root, tmp_path)
  assert cache.kind == 'femnist'
  assert client_data.client_ids == ['f0000_03', 'f0001_07', 'f0002_11']
  assert cache.num_examples == (1, 3, 2)
  assert cache.num_test_examples == 4
  for user, (rows, labels) in train.items():
    x, y = _arrays(client_data.create_tf_dataset_for_client(user))
    assert x.dtype == np.float32 and x.shape == (len(rows), 28, 28, 1)
    # float32 of the Python floats written, exactly (row-major 28x28).
    np.testing.assert_array_equal(
        x, np.asarray(rows, np.float32).reshape(-1, 28, 28, 1)
    )
    np.testing.assert_array_equal(y, labels)
    # The fixture's fixed pixels: x[0] = 1.0, x[1] = 0.5, x[783] = 0.0.
    assert (x[:, 0, 0, 0] == 1.0).all() and (x[:, 0, 1, 0] == 0.5).all()
    assert (x[:, 27, 27, 0] == 0.0).all()
  # Test split pooled: its file's users in order f0001_07, f0002_11, f0000_03.
  x, y = _arrays(leaf_client_data.test_dataset(cache))
  np.testing.assert_array_equal(y, [61, 0, 3, 4])
  expected = np.concatenate(
      [np.asarray(test[u][0], np.float32) for u in test]
  ).reshape(-1, 28, 28, 1)
  np.testing.assert_array_equal(x, expected)


def test_femnist_class_counts_are_each_clients_own(tmp_path):
  root, train, _ = leaf_fixtures.femnist_by_sample(tmp_path / 'leaf')
  cache, _ = _load(root, tmp_path)
  assert cache.class_counts.shape == (3, 62)
  for i, user in enumerate(cache.client_ids):
    np.testing.assert_array_equal(
        cache.class_counts[i], np.bincount(train[user][1], minlength=62)
    )
  # f0001_07 has labels 0, 61, 5: one each.
  assert cache.class_counts[1, [0, 5, 61]].tolist() == [1, 1, 1]


def test_shakespeare_split_by_user(tmp_path):
  root, _, _ = leaf_fixtures.shakespeare_by_user(tmp_path / 'leaf')
  cache, client_data = _load(root, tmp_path)
  assert cache.kind == 'shakespeare'
  assert client_data.client_ids == ['HAMLET_HAMLET', 'THE_TEMPEST_PROSPERO']
  # Ids 1 + ALL_LETTERS.find(c): 'A' 26, '}' 80, '\n' 1, 'b' 55, ' ' 2,
  # 'T' (25 + 19) 45, 'o' (53 + 14) 68, 'a' 54.
  line_b = [26] * 79 + [80]
  x, y = _arrays(client_data.create_tf_dataset_for_client('HAMLET_HAMLET'))
  np.testing.assert_array_equal(x, [line_b])
  np.testing.assert_array_equal(y, [80])
  x, y = _arrays(
      client_data.create_tf_dataset_for_client('THE_TEMPEST_PROSPERO')
  )
  assert x.dtype == np.int32 and x.shape == (2, 80)
  assert x[0, :4].tolist() == [45, 68, 2, 55]  # 'To b'
  assert x[0, 42] == 1 and x[0, 43:].tolist() == [54] * 37  # '\n', 'a' * 37
  np.testing.assert_array_equal(x[1], line_b)
  np.testing.assert_array_equal(y, [55, 1])
  x, y = _arrays(leaf_client_data.test_dataset(cache))  # KING_LEAR_EDMUND
  np.testing.assert_array_equal(x[0, :4], [45, 68, 2, 55])
  np.testing.assert_array_equal(y, [2])


@pytest.mark.parametrize('kind', ['auto', 'shakespeare'])
def test_kind_detected_or_named(tmp_path, kind):
  root, _, _ = leaf_fixtures.shakespeare_by_user(tmp_path / 'leaf')
  assert _load(root, tmp_path, kind)[0].kind == 'shakespeare'


def test_iter_leaf_file_ignores_hierarchies(tmp_path):
  path = leaf_fixtures.write_leaf_json(
      str(tmp_path / 'a.json'),
      {
          'u1': ([leaf_fixtures.LINE_A], ['x']),
          'u2': ([leaf_fixtures.LINE_B], ['y']),
      },
      hierarchies=['play_1', 'play_2'],
  )
  kind, users = leaf.iter_leaf_file(path)
  assert kind == 'shakespeare'
  got = [(user, y.tolist()) for user, _, y in users]
  # 'x' is a-z's 24th letter: 53 + 23 + 1 = 77; 'y': 78.
  assert got == [('u1', [77]), ('u2', [78])]


def test_client_ids_with_any_characters_read_by_id(tmp_path):
  # Ids become URL-safe base64 file names, the same in Python and TF.
  users = {
      'play/ROMEO é?': ([leaf_fixtures.LINE_B], ['a']),
      '../x': ([leaf_fixtures.LINE_A], ['b']),
  }
  root = leaf_fixtures.write_leaf_dir(
      tmp_path / 'leaf', {'t.json': users}, {'t.json': users}
  )
  _, client_data = _load(root, tmp_path)
  for user, expected in (('play/ROMEO é?', 54), ('../x', 55)):
    _, y = _arrays(client_data.create_tf_dataset_for_client(user))
    assert y.tolist() == [expected]


@pytest.mark.parametrize(
    'name, num_test_users', [('shakespeare_sample', 4), ('shakespeare_user', 1)]
)
def test_directories_written_by_leafs_scripts(tmp_path, name, num_test_users):
  # tests/data/leaf_generated: LEAF's preprocess.sh by sample and by user.
  root = os.path.join(leaf_fixtures.GENERATED_DIR, name)
  rows = {
      split: {
          u: len(r['x'])
          for u, r in leaf_fixtures.generated_json(name, split)[
              'user_data'
          ].items()
      }
      for split in ('train', 'test')
  }
  cache = leaf_cache.load_leaf_cache(root, cache_dir=str(tmp_path / 'cache'))
  assert cache.kind == 'shakespeare'
  assert len(rows['test']) == num_test_users
  assert dict(zip(cache.client_ids, cache.num_examples)) == rows['train']
  assert cache.num_test_examples == sum(rows['test'].values())


def test_synthetic_written_by_leafs_generator(tmp_path):
  # tests/data/leaf_generated/synthetic_sample: LEAF's main.py -num-dim 10
  # -num-classes 3, preprocess.sh -t sample; float32 of the JSON's numbers.
  root = os.path.join(leaf_fixtures.GENERATED_DIR, 'synthetic_sample')
  train, test = (
      leaf_fixtures.generated_json('synthetic_sample', s)
      for s in ('train', 'test')
  )
  cache, client_data = _load(root, tmp_path)
  labels = [
      c for d in (train, test) for r in d['user_data'].values() for c in r['y']
  ]
  assert (cache.kind, cache.x_width) == ('synthetic', 10)
  assert cache.num_classes == max(labels) + 1 == 3
  assert client_data.client_ids == sorted(train['users'])
  for i, user in enumerate(cache.client_ids):
    rows, y_json = (train['user_data'][user][k] for k in ('x', 'y'))
    x, y = _arrays(client_data.create_tf_dataset_for_client(user))
    assert x.dtype == np.float32 and x.shape == (len(rows), 10)
    np.testing.assert_array_equal(x, np.asarray(rows, np.float32))
    np.testing.assert_array_equal(y, y_json)
    np.testing.assert_array_equal(
        cache.class_counts[i], np.bincount(y_json, minlength=3)
    )
  x, y = _arrays(leaf_client_data.test_dataset(cache))
  np.testing.assert_array_equal(
      x,
      np.concatenate(
          [
              np.asarray(test['user_data'][u]['x'], np.float32)
              for u in test['users']
          ]
      ),
  )
