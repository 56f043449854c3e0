"""Every bad LEAF directory is one `LeafDataError` line: file, user, problem.

Each case writes a small directory that is good except for one thing, and
checks the message names the file, the user (or index) and the problem.
"""

import os

import numpy as np
import pytest

from tests.data import leaf_fixtures as fx
from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache

_GOOD_TEST = {'t.json': {'u9': ([fx.LINE_A], ['a'])}}
_F_ROW = [0.5] * 784


def _dir(tmp_path, train, test=None):
  return fx.write_leaf_dir(tmp_path / 'leaf', train, test or _GOOD_TEST)


def _one_user(tmp_path, x, y, **kwargs):
  """train/a.json with user 'u1' holding (x, y), written as given."""
  root = _dir(tmp_path, {})
  fx.write_leaf_json(
      os.path.join(root, 'train', 'a.json'), {'u1': (x, y)}, **kwargs
  )
  return root


def _invalid_json(tmp_path):
  root = _dir(tmp_path, {})
  with open(os.path.join(root, 'train', 'a.json'), 'w') as f:
    f.write('{"users": ["u1",\n  ]}')  # The ']' at line 2, column 3.
  return (
      root,
      r'train/a\.json: invalid JSON at line 2 column 3: Expecting value',
  )


def _user_not_in_user_data(tmp_path):
  return (
      _one_user(tmp_path, [fx.LINE_A], ['a'], users=['u1', 'u2']),
      r"a\.json: user 'u2': is in \"users\" but not in \"user_data\"",
  )


def _user_data_not_in_users(tmp_path):
  return (
      _one_user(tmp_path, [fx.LINE_A], ['a'], users=[], num_samples=[]),
      r"a\.json: user 'u1': is in \"user_data\" but not in \"users\"",
  )


def _num_samples_length(tmp_path):
  return (
      _one_user(tmp_path, [fx.LINE_A], ['a'], num_samples=[1, 1]),
      r'a\.json: "num_samples" has 2 entries for 1 users',
  )


def _x_y_lengths(tmp_path):
  return (
      _one_user(tmp_path, [fx.LINE_A, fx.LINE_B], ['a'], num_samples=[2]),
      r"a\.json: user 'u1': x has 2 rows but y has 1 labels",
  )


def _no_examples(tmp_path):
  return (
      _one_user(tmp_path, [], []),
      r"a\.json: user 'u1': has no examples",
  )


def _femnist_row_length(tmp_path):
  return (
      _one_user(tmp_path, [_F_ROW, [0.5] * 783], [1, 2]),
      r"a\.json: user 'u1': x row 1 has 783 values; FEMNIST rows have 784",
  )


def _femnist_not_a_number(tmp_path):
  return (
      _one_user(tmp_path, [_F_ROW, [0.5] * 783 + ['1']], [1, 2]),
      r"a\.json: user 'u1': x row 1 holds a value that is not a number",
  )


def _femnist_not_finite(tmp_path):
  return (
      _one_user(tmp_path, [_F_ROW, [float('nan')] * 784], [1, 2]),
      r"a\.json: user 'u1': x row 1 holds a non-finite value",
  )


def _label_out_of_range(tmp_path):
  return (
      _one_user(tmp_path, [_F_ROW, _F_ROW], [61, 62]),
      r"a\.json: user 'u1': y\[1\] = 62 is out of range \[0, 62\)",
  )


def _label_negative(tmp_path):
  return (
      _one_user(tmp_path, [_F_ROW], [-1]),
      r"a\.json: user 'u1': y\[0\] = -1 is out of range",
  )


def _label_not_integer(tmp_path):
  return (
      _one_user(tmp_path, [_F_ROW, _F_ROW], [3, 3.0]),
      r"a\.json: user 'u1': y\[1\] = 3\.0 is not an integer label",
  )


def _shakespeare_row_length(tmp_path):
  return (
      _one_user(tmp_path, [fx.LINE_A, fx.LINE_A[:79]], ['a', 'b']),
      r"a\.json: user 'u1': x\[1\] has 79 characters; Shakespeare x is a "
      r'string of 80 characters',
  )


def _shakespeare_label_length(tmp_path):
  return (
      _one_user(tmp_path, [fx.LINE_A], ['ab']),
      r"a\.json: user 'u1': y\[0\] has 2 characters; Shakespeare y is a "
      r'string of 1 character',
  )


def _missing_train(tmp_path):
  root = _dir(tmp_path, {})
  os.rmdir(os.path.join(root, 'train'))
  return root, r'leaf/train: missing: a LEAF directory holds train/ and test/'


def _empty_test(tmp_path):
  root = _dir(tmp_path, {'a.json': {'u1': ([fx.LINE_A], ['a'])}})
  os.remove(os.path.join(root, 'test', 't.json'))
  return root, r'leaf/test: holds no \.json file'


def _only_empty_files(tmp_path):
  root = _dir(tmp_path, {})
  fx.write_leaf_json(os.path.join(root, 'train', 'a.json'), {})
  fx.write_leaf_json(os.path.join(root, 'train', 'b.json'), {})
  return root, (
      r'leaf/train: no user in any \.json file \(each has "users": \[\]\); '
      r'a LEAF split needs at least one user'
  )


def _mixed_kinds(tmp_path):
  root = _dir(
      tmp_path,
      {
          'a.json': {'u1': ([fx.LINE_A], ['a'])},
          'b.json': {'u2': ([_F_ROW], [1])},
      },
  )
  return root, (
      r'train/b\.json: holds femnist-style data but \S+train/a\.json holds '
      r'shakespeare-style data; a LEAF directory holds one kind'
  )


def _mixed_kinds_train_test(tmp_path):
  root = _dir(tmp_path, {'a.json': {'u1': ([_F_ROW], [1])}})
  return root, (
      r'test/t\.json: holds shakespeare-style data but \S+train/a\.json holds '
      r'femnist-style data'
  )


def _duplicate_user(tmp_path):
  users = {'u1': ([fx.LINE_A], ['a'])}
  root = _dir(tmp_path, {'a.json': users, 'b.json': users})
  return root, r"train/b\.json: user 'u1': appears in \S+train/a\.json too"


def _sent140(tmp_path):
  # Sentiment140's polarity 4 where LEAF's data_to_json.py writes 1.
  tweet = ['1467810369', 'Mon Apr 06 22:19:45 PDT 2009', 'NO_QUERY', 'u', 'hi']
  return (
      _one_user(tmp_path, [tweet], [4]),
      r"a\.json: user 'u1': y\[0\] = 4; Sent140 labels are 0 or 1",
  )


def _gaussian_rows(width, n=3):
  # LEAF's Synthetic generator draws x ~ N(v, Sigma): values outside [0, 1].
  rng = np.random.default_rng(0)
  return rng.normal(size=(n, width)).round(6).tolist()


def test_gaussian_rows_of_784_are_synthetic_not_images(tmp_path):
  # A Synthetic set made with -num-dim 784 (read silently as images before).
  users = {'u1': (_gaussian_rows(784), [0, 1, 2])}
  root = _dir(tmp_path, {'a.json': users}, {'a.json': users})
  with pytest.raises(
      leaf.LeafDataError,
      match=r"a\.json: user 'u1': holds synthetic-style data, not femnist",
  ):
    leaf_cache.load_leaf_cache(root, 'femnist', cache_dir=str(tmp_path / 'c'))
  cache = leaf_cache.load_leaf_cache(root, cache_dir=str(tmp_path / 'c'))
  assert (cache.kind, cache.x_width, cache.num_classes) == ('synthetic', 784, 3)


def _synthetic_widths(tmp_path):
  root = _dir(
      tmp_path,
      {
          'a.json': {'u1': (_gaussian_rows(3), [0, 1, 0])},
          'b.json': {'u2': (_gaussian_rows(4), [1, 1, 0])},
      },
  )
  return root, (
      r'train/b\.json: x rows have 4 values but \S+train/a\.json has rows of '
      r'3; a LEAF directory has one width'
  )


def _synthetic_row_width(tmp_path):
  return (
      _one_user(tmp_path, [[0.5, -2.0], [0.5]], [0, 1]),
      r"a\.json: user 'u1': x row 1 has 1 values; Synthetic rows here have 2 "
      r'\(row 0\)',
  )


def _synthetic_label(tmp_path):
  return (
      _one_user(tmp_path, [[0.5, -2.0], [0.5, 3.0]], [0, -1]),
      r"a\.json: user 'u1': y\[1\] = -1 is not an integer label >= 0",
  )


_CASES = {
    f.__name__.lstrip('_'): f
    for f in (
        _invalid_json,
        _user_not_in_user_data,
        _user_data_not_in_users,
        _num_samples_length,
        _x_y_lengths,
        _no_examples,
        _femnist_row_length,
        _femnist_not_a_number,
        _femnist_not_finite,
        _label_out_of_range,
        _label_negative,
        _label_not_integer,
        _shakespeare_row_length,
        _shakespeare_label_length,
        _missing_train,
        _empty_test,
        _only_empty_files,
        _mixed_kinds,
        _mixed_kinds_train_test,
        _duplicate_user,
        _sent140,
        _synthetic_widths,
        _synthetic_row_width,
        _synthetic_label,
    )
}


@pytest.mark.parametrize('case', sorted(_CASES))
def test_bad_directory_is_one_line(tmp_path, case):
  root, match = _CASES[case](tmp_path)
  cache_dir = tmp_path / 'cache'
  with pytest.raises(leaf.LeafDataError, match=match) as raised:
    leaf_cache.load_leaf_cache(root, cache_dir=str(cache_dir))
  assert '\n' not in str(raised.value)
  # Nothing of a failed conversion is left to be used.
  assert not cache_dir.exists() or not [
      p for p in cache_dir.iterdir() if (p / 'index.json').exists()
  ]


def test_named_kind_the_data_do_not_hold(tmp_path):
  root = _one_user(tmp_path, [fx.LINE_A], ['a'])
  with pytest.raises(
      leaf.LeafDataError,
      match=r"train/a\.json: user 'u1': holds shakespeare-style data, not "
      r'femnist',
  ):
    leaf_cache.load_leaf_cache(root, 'femnist', str(tmp_path / 'cache'))


def test_unknown_kind(tmp_path):
  with pytest.raises(leaf.LeafDataError, match=r'`leaf_kind` must be one of'):
    leaf_cache.load_leaf_cache(str(tmp_path), 'emnist')


def test_leaf_data_error_is_a_value_error():
  assert issubclass(leaf.LeafDataError, ValueError)
