"""Tests for tff_fedwin.data.leaf_cache_trust: the cache used only if ours.

A conversion another user wrote (here: chowned to `nobody`), a symbolic link
planted at `<key>`, a cache directory of another user, a conversion of an
older converter: none is served, nothing of theirs is removed, and the data
are a fresh conversion's, byte for byte. A transient read error (EIO, ...)
is one line and removes nothing.
"""

import errno
import logging
import os
import pwd
import stat
import tempfile

import numpy as np
import pytest

from tests import file_trees
from tests.data import leaf_fixtures
from tff_fedwin import errors
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_cache_trust
from tff_fedwin.data import leaf_convert

_NOBODY = pwd.getpwnam('nobody')


@pytest.fixture
def femnist(tmp_path, monkeypatch):
  # Private conversions go to $TMPDIR: here, inside the test's directory.
  private_root = tmp_path / 'tmpdir'
  private_root.mkdir()
  monkeypatch.setattr(tempfile, 'tempdir', str(private_root))
  root, train, _ = leaf_fixtures.femnist_by_sample(tmp_path / 'leaf')
  return root, train, str(tmp_path / 'cache'), str(private_root)


def _labels(directory, user='f0002_11'):
  """A training client's labels, read from the files of a conversion."""
  name = leaf_convert.client_file_name(user)
  return np.fromfile(os.path.join(directory, 'train', name + '.y'), '<i4')


def _poison(directory):
  """Changes a client's labels, keeping every size (the index still fits)."""
  name = leaf_convert.client_file_name('f0002_11')
  np.asarray([9, 9], '<i4').tofile(
      os.path.join(directory, 'train', name + '.y')
  )


def _chown_tree(directory, owner):
  for parent, dirs, names in os.walk(directory):
    for name in [parent, *(os.path.join(parent, n) for n in dirs + names)]:
      os.chown(name, owner.pw_uid, owner.pw_gid)


def _assert_fresh(cache, root, tmp_path, private_root):
  """`cache` converted now, privately, equal to a conversion of its own."""
  assert cache.converted
  assert os.path.dirname(cache.directory) == private_root
  assert stat.S_IMODE(os.stat(cache.directory).st_mode) == 0o700
  fresh = leaf_cache.load_leaf_cache(root, cache_dir=str(tmp_path / 'fresh'))
  assert file_trees.tree_bytes(cache.directory) == file_trees.tree_bytes(
      fresh.directory
  )
  assert _labels(cache.directory).tolist() == [7, 7]


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']


def test_entry_of_another_user_is_not_used(femnist, tmp_path, caplog):
  root, _, cache_dir, private_root = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  _poison(first.directory)
  _chown_tree(first.directory, _NOBODY)
  with caplog.at_level(logging.WARNING, logger='absl'):
    second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  (warning,) = _warnings(caplog)
  assert warning.startswith(f'{first.directory} is owned by uid 65534, not')
  assert second.directory in warning
  _assert_fresh(second, root, tmp_path, private_root)
  # Theirs is left as it is.
  assert os.stat(first.directory).st_uid == _NOBODY.pw_uid
  assert _labels(first.directory).tolist() == [9, 9]


def test_symlink_planted_at_the_key_is_not_followed(femnist, tmp_path, caplog):
  root, _, cache_dir, private_root = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  planted = str(tmp_path / 'planted')
  os.rename(first.directory, planted)
  _poison(planted)
  os.symlink(planted, first.directory)
  with caplog.at_level(logging.WARNING, logger='absl'):
    second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  (warning,) = _warnings(caplog)
  assert warning.startswith(f'{first.directory} is a symbolic link')
  _assert_fresh(second, root, tmp_path, private_root)
  assert os.readlink(first.directory) == planted
  assert _labels(planted).tolist() == [9, 9]


def test_cache_directory_of_another_user_is_not_written(
    femnist, tmp_path, caplog
):
  root, _, cache_dir, private_root = femnist
  os.makedirs(cache_dir)
  os.chown(cache_dir, _NOBODY.pw_uid, _NOBODY.pw_gid)
  with caplog.at_level(logging.WARNING, logger='absl'):
    cache = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  (warning,) = _warnings(caplog)
  assert warning.startswith(f'{cache_dir} is owned by uid 65534')
  _assert_fresh(cache, root, tmp_path, private_root)
  assert os.listdir(cache_dir) == []


def test_conversion_of_an_older_converter_is_not_served(femnist, monkeypatch):
  root, _, cache_dir, _ = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  version = leaf_convert.CONVERTER_VERSION
  monkeypatch.setattr(leaf_convert, 'CONVERTER_VERSION', version + 1)
  second = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert second.converted and second.directory != first.directory
  assert os.path.dirname(second.directory) == cache_dir
  # Also an index of the older converter found at the newer key.
  monkeypatch.setattr(leaf_convert, 'CONVERTER_VERSION', version)
  third = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert not third.converted and third.directory == first.directory


@pytest.mark.parametrize(
    'code', [errno.EIO, errno.EMFILE, errno.ENOSPC], ids=errno.errorcode.get
)
def test_transient_error_keeps_the_entry(femnist, monkeypatch, code):
  root, _, cache_dir, _ = femnist
  first = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  before = file_trees.tree_bytes(first.directory)
  getsize = os.path.getsize

  def failing(path):
    if str(path).startswith(first.directory + os.sep):
      raise OSError(code, os.strerror(code), path)
    return getsize(path)

  monkeypatch.setattr(os.path, 'getsize', failing)
  with pytest.raises(leaf_cache_trust.LeafCacheError) as raised:
    leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  message = str(raised.value)
  assert isinstance(raised.value, errors.UserError) and '\n' not in message
  assert message.startswith(f'{first.directory}: cannot read the LEAF cache')
  assert errno.errorcode[code] in message and '--cache_dir' in message
  monkeypatch.undo()
  assert file_trees.tree_bytes(first.directory) == before
  again = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  assert not again.converted and again.directory == first.directory


def test_symlink_planted_during_the_conversion_is_not_used(
    femnist, tmp_path, monkeypatch, caplog
):
  # The rename onto `<key>` fails: not taken as another process's conversion.
  root, _, cache_dir, _ = femnist
  planted = leaf_cache.load_leaf_cache(root, cache_dir=str(tmp_path / 'other'))
  _poison(planted.directory)
  key = os.path.basename(planted.directory)
  convert_splits = leaf_convert.convert_splits

  def planting(*args, **kwargs):
    result = convert_splits(*args, **kwargs)
    os.symlink(planted.directory, os.path.join(cache_dir, key))
    return result

  monkeypatch.setattr(leaf_convert, 'convert_splits', planting)
  with caplog.at_level(logging.WARNING, logger='absl'):
    cache = leaf_cache.load_leaf_cache(root, cache_dir=cache_dir)
  (warning,) = _warnings(caplog)
  assert 'is a symbolic link' in warning and cache.directory in warning
  assert os.path.basename(cache.directory).startswith(f'.{key}.tmp-')
  assert _labels(cache.directory).tolist() == [7, 7]
  assert _labels(planted.directory).tolist() == [9, 9]
