"""Tests for tff_fedwin.data.leaf_cache: convert once, reuse, never half.

A cache hit parses no LEAF file (its reader replaced by one that fails);
a changed file, even of the same size and time, converts again; a
conversion that did not finish is never used; the datasets the workers build
from the ids (the `dataset_computation`) hold the JSON's numbers exactly.
"""

import concurrent.futures
import json
import multiprocessing
import os
import shutil

import numpy as np
import pytest

from tests import file_trees
from tests.data import leaf_fixtures
from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_client_data
from tff_fedwin.data import leaf_convert


def _no_parsing(*args, **kwargs):
  raise AssertionError('a LEAF file parsed on a cache hit')


@pytest.fixture
def femnist(tmp_path):
  root, train, test = leaf_fixtures.femnist_by_sample(tmp_path / 'leaf')
  return root, train, test, str(tmp_path / 'cache')


def _y(cache, user):
  client_data = leaf_client_data.LeafClientData(cache)
  dataset = client_data.create_tf_dataset_for_client(user)
  return [int(e['y']) for e in dataset.as_numpy_iterator()]


def test_second_load_parses_nothing(femnist, monkeypatch):
  root, train, _, cache_dir = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert first.converted
  index = os.path.join(first.directory, leaf_cache.INDEX)
  mtime = os.stat(index).st_mtime_ns
  monkeypatch.setattr(leaf, 'load_json', _no_parsing)
  monkeypatch.setattr(leaf, 'iter_leaf_file', _no_parsing)
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert not second.converted
  assert second.directory == first.directory
  assert os.stat(index).st_mtime_ns == mtime
  assert second.client_ids == first.client_ids
  assert _y(second, 'f0001_07') == train['f0001_07'][1]


def test_changed_file_of_same_size_and_time_converts_again(femnist):
  root, train, _, cache_dir = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  path = os.path.join(root, 'train', 'all_data_1_niid_0_keep_0_train_9.json')
  stat = os.stat(path)
  with open(path) as f:
    text = f.read()
  assert text.count('[36]') == 1
  with open(path, 'w') as f:
    f.write(text.replace('[36]', '[37]'))  # The same size.
  os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # The same time.
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert second.converted and second.directory != first.directory
  assert _y(second, 'f0000_03') == [37]
  assert _y(first, 'f0000_03') == train['f0000_03'][1] == [36]


def test_interrupted_conversion_leaves_nothing_used(femnist, monkeypatch):
  root, train, _, cache_dir = femnist
  calls = []
  convert_file = leaf_convert._convert_file

  def interrupted(path, kind, out_dir, is_train, part, inputs):
    calls.append(out_dir)
    if not is_train:  # After the training clients are written.
      raise KeyboardInterrupt
    return convert_file(path, kind, out_dir, is_train, part, inputs)

  monkeypatch.setattr(leaf_convert, '_convert_file', interrupted)
  with pytest.raises(KeyboardInterrupt, match=r'^$'):
    leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert len(set(calls)) == 1 and not os.path.exists(calls[0])
  assert os.listdir(cache_dir) == []
  monkeypatch.undo()
  cache = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert cache.converted
  assert _y(cache, 'f0001_07') == train['f0001_07'][1]


def test_conversion_by_two_processes_equals_one(femnist, tmp_path, monkeypatch):
  # The files converted by two processes at once, merged in order: the same
  # bytes in every file as converted one file after another. (Spawned: this
  # test process may run TensorFlow; the scripts fork before importing it.)
  root, _, _, _ = femnist
  context = multiprocessing.get_context('spawn')
  monkeypatch.setattr(leaf_convert, 'pool_context', lambda: context)
  pools = []
  pool_class = concurrent.futures.ProcessPoolExecutor

  def recorded(workers, mp_context):
    pools.append(workers)
    return pool_class(workers, mp_context)

  monkeypatch.setattr(
      leaf_convert.concurrent.futures, 'ProcessPoolExecutor', recorded
  )
  files = leaf_cache.json_files(root)
  results = []
  for workers in (1, 2):
    out = tmp_path / f'out{workers}'
    out.mkdir()
    converted = leaf_convert.convert_splits(files, 'auto', str(out), workers)
    results.append((converted, file_trees.tree_bytes(out)))
  assert pools == [2]
  assert results[0][0] == results[1][0]
  assert results[0][1] == results[1][1]
  assert 'test.x' in results[0][1] and not any(
      name.startswith('test_parts') for name in results[0][1]
  )


def test_two_processes_report_the_first_problem_in_file_order(
    femnist, tmp_path, monkeypatch
):
  # A problem in train file 1 and in test file 0: one process reading the
  # files in order meets train file 1's first, and so do two.
  root, _, _, _ = femnist
  files = leaf_cache.json_files(root)
  for path, bad in ((files['train'][1], 'train'), (files['test'][0], 'test')):
    with open(path, 'w') as f:
      f.write('{"users": [' + bad)
  context = multiprocessing.get_context('spawn')
  monkeypatch.setattr(leaf_convert, 'pool_context', lambda: context)
  for workers in (1, 2):
    out = tmp_path / f'out{workers}'
    out.mkdir()
    with pytest.raises(leaf.LeafDataError, match='invalid JSON') as raised:
      leaf_convert.convert_splits(files, 'auto', str(out), workers)
    assert str(raised.value).startswith(files['train'][1] + ':')


def test_later_start_reads_no_json_byte(femnist, monkeypatch):
  root, train, _, cache_dir = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  monkeypatch.setattr(leaf_cache, '_crc32', _no_parsing)
  monkeypatch.setattr(leaf, 'iter_leaf_file', _no_parsing)
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert not second.converted and second.directory == first.directory
  assert _y(second, 'f0001_07') == train['f0001_07'][1]


def test_touched_file_is_read_again_not_converted(femnist, monkeypatch):
  # A new modification time, the same bytes: the stat digest misses, the
  # CRC-32s are read, and the content key finds the conversion.
  root, _, _, cache_dir = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  path = os.path.join(root, 'train', 'all_data_1_niid_0_keep_0_train_9.json')
  os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 10**9))
  monkeypatch.setattr(leaf, 'iter_leaf_file', _no_parsing)
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert not second.converted


def test_killed_conversion_directory_is_ignored(femnist):
  # A kill leaves `.<key>.tmp-*` (here: a complete copy, without the final
  # rename); only `<key>` with its index is ever used.
  root, _, _, cache_dir = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  key = os.path.basename(first.directory)
  os.rename(first.directory, os.path.join(cache_dir, f'.{key}.tmp-killed'))
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert second.converted and second.directory == first.directory


@pytest.mark.parametrize(
    'damage', ['no_index', 'truncated', 'other_key', 'no_test_users']
)
def test_damaged_cache_converts_again(femnist, damage):
  root, train, _, cache_dir = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  index = os.path.join(first.directory, leaf_cache.INDEX)
  if damage == 'no_index':
    os.remove(index)
  elif damage == 'truncated':
    x_path, _ = first.client_files('f0002_11')
    os.truncate(x_path, 784 * 4)  # One of its two examples.
  else:
    with open(index) as f:
      record = json.load(f)
    if damage == 'other_key':
      record['key'] = '0' * 32
    else:  # An index written before the test users were recorded.
      del record['test_users']
    with open(index, 'w') as f:
      json.dump(record, f)
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert second.converted
  assert _y(second, 'f0002_11') == train['f0002_11'][1]


def test_test_users_are_the_test_files_users_in_order(femnist):
  # `test.x` holds the test file's users in the file's order, each user's
  # examples together: f0001_07 (1), f0002_11 (1), f0000_03 (2).
  root, _, test, cache_dir = femnist
  cache = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert cache.test_users == (('f0001_07', 1), ('f0002_11', 1), ('f0000_03', 2))
  assert list(test) == [user for user, _ in cache.test_users]
  pooled = leaf_client_data.test_dataset(cache).as_numpy_iterator()
  assert [int(e['y']) for e in pooled] == [61, 0, 3, 4]


def test_dataset_computation_by_id_holds_the_json_numbers(femnist):
  # What the workers run: the id in, the client's examples out.
  root, train, _, cache_dir = femnist
  cache = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  client_data = leaf_client_data.LeafClientData(cache)
  assert client_data.DATASETS_FROM_IDS
  computation = client_data.dataset_computation
  for user, (rows, labels) in train.items():
    elements = list(computation(user))
    x = np.stack([e['x'] for e in elements])
    np.testing.assert_array_equal(
        x, np.asarray(rows, np.float32).reshape(-1, 28, 28, 1)
    )
    assert [int(e['y']) for e in elements] == labels


def test_cache_files_are_raw_little_endian(femnist):
  root, train, _, cache_dir = femnist
  cache = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  x_path, y_path = cache.client_files('f0002_11')
  assert os.path.basename(x_path) == 'ZjAwMDJfMTE.x'  # base64('f0002_11')
  np.testing.assert_array_equal(
      np.fromfile(x_path, '<f4').reshape(2, 784),
      np.asarray(train['f0002_11'][0], np.float32),
  )
  np.testing.assert_array_equal(np.fromfile(y_path, '<i4'), [7, 7])
  shutil.rmtree(cache_dir)
  assert not os.path.exists(x_path)
