"""LEAF's JSON data (Caldas et al. 2018), read and checked one file at a time.

LEAF's `preprocess.sh` writes `DIR/train/*.json` and `DIR/test/*.json`: the
format, both of LEAF's splits, the kinds' rows and what is accepted with a
warning are in docs/data.md ("LEAF's JSON"). A user is one client, as LEAF
partitioned it. The kind is recognized from the first row of a file's first
user (`tff_fedwin.data.leaf_kinds`) or named, never guessed between two, and
each user's rows are kept as:

* `femnist`: float32 `[n, 784]` exactly as written, int32 `[n]` in `[0, 62)`.
* `shakespeare`: uint8 ids `1 + ALL_LETTERS.find(c)`, `[n, 80]` and `[n]`,
  as LEAF's reader maps them (`models/utils/language_utils.py`:
  `word_to_indices` for `x`, `letter_to_vec` for `y`); id 0 is left for
  padding (`PAD_ID`). A character outside `ALL_LETTERS` is id 0 in `x`
  (`find` gives -1) and id 80 in `y` (LEAF's one-hot sets index -1, `'}'`).
* `synthetic`: float32 `[n, d]` exactly as written (every row of the
  directory `d` wide), int32 `[n]`; the classes are `0..max(y)` of both
  splits.
* `sent140`: int32 `[n, 25]` word ids of the tweet, as LEAF's Sent140 model
  maps it, and int32 `[n]` (`tff_fedwin.data.leaf_sent140`).
* `celeba`: uint8 `[n, 84 * 84 * 3]`, each image as LEAF's CNN loads it,
  and int32 `[n]` (`tff_fedwin.data.leaf_celeba`).
* `reddit`: int32 `[n, 10]` input and target ids of the `n` sequences
  (`tff_fedwin.data.leaf_reddit`).

What LEAF's scripts write and LEAF's reader accepts is accepted, and counted
in a `leaf_kinds.LeafNotes` for one warning each. Every other problem is a
one-line `LeafDataError` naming the file, the user (or index) and what is
wrong, raised while reading (plain Python and numpy, no TensorFlow).
Memory: `iter_leaf_file` holds one file's parsed JSON, and frees each user's
Python lists as soon as they are numpy arrays.
"""

import json
import os
from collections.abc import Iterator
from typing import Any, Optional

import numpy as np

from tff_fedwin.data import json_limits
from tff_fedwin.data import leaf_celeba
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import leaf_reddit
from tff_fedwin.data import leaf_sent140
from tff_fedwin.data import leaf_shakespeare

KINDS = leaf_kinds.KINDS
FEMNIST_PIXELS = leaf_kinds.FEMNIST_PIXELS
FEMNIST_CLASSES = 62
# Shakespeare's characters and ids (`leaf_shakespeare`).
ALL_LETTERS = leaf_shakespeare.ALL_LETTERS
SHAKESPEARE_SEQ_LENGTH = leaf_shakespeare.SEQ_LENGTH
PAD_ID = leaf_shakespeare.PAD_ID
SHAKESPEARE_VOCAB_SIZE = leaf_shakespeare.VOCAB_SIZE
encode_letters = leaf_shakespeare.encode_letters


LeafDataError = leaf_kinds.LeafDataError
_error = leaf_kinds.error


def leaf_json_files(data_dir: str, split: str) -> list[str]:
  """The sorted `.json` files of `DIR/<split>/`.

  Args:
    data_dir: A LEAF data directory (holding `train/` and `test/`).
    split: 'train' or 'test'.

  Returns:
    Absolute paths, sorted by name.

  Raises:
    LeafDataError: If the directory is missing or holds no `.json` file.
  """
  directory = os.path.join(os.path.abspath(data_dir), split)
  if not os.path.isdir(directory):
    raise _error(
        directory,
        None,
        'missing: a LEAF directory holds train/ and test/ with .json files',
    )
  names = sorted(
      n
      for n in os.listdir(directory)
      if n.endswith('.json') and os.path.isfile(os.path.join(directory, n))
  )
  if not names:
    raise _error(directory, None, 'holds no .json file')
  return [os.path.join(directory, n) for n in names]


class _SharedFloats(dict):
  """JSON float text -> one shared float object (at most `_SHARED_FLOATS`).

  `json.load`'s `parse_float`: LEAF's FEMNIST pixels are few distinct
  values, so one float object each instead of one per pixel (measured on a
  123 MB file of 20k rows: peak RSS 269 MB instead of 884 MB, and no slower).
  """

  def __missing__(self, text: str) -> float:
    value = float(text)
    if len(self) < _SHARED_FLOATS:
      self[text] = value
    return value


_SHARED_FLOATS = 100_000


def load_json(path: str) -> Any:
  """The parsed file (read as text: the bytes are not held beside it)."""
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f, parse_float=_SharedFloats().__getitem__)
  except json.JSONDecodeError as e:
    raise _error(
        path, None, f'invalid JSON at line {e.lineno} column {e.colno}: {e.msg}'
    ) from None
  except UnicodeDecodeError as e:
    raise _error(path, None, f'invalid JSON: not UTF-8 ({e.reason})') from None
  except json_limits.LIMIT_ERRORS as e:  # Deep nesting, a huge integer.
    raise _error(path, None, json_limits.problem(e)) from None


def detect_kind(path: str, user: str, row: Any, label: Any = None) -> str:
  """The kind (one of `KINDS`) of an `x` row and its `y` label.

  `leaf_kinds.kind_of`'s; `path`, `user` name the file and user in errors.
  """
  kind = leaf_kinds.kind_of(row, label)
  if kind is None:
    raise _error(
        path,
        f'user {user!r}',
        f'x row 0 is a {type(row).__name__}; LEAF rows are lists of numbers '
        '(FEMNIST, Synthetic), 80-character strings (Shakespeare), image '
        'file names (CelebA), lists ending in the tweet (Sent140) or lists '
        'of token lists (Reddit)',
    )
  return kind


def _check_structure(path: str, data: Any) -> tuple[list, list, dict]:
  """`users`, `num_samples`, `user_data`, checked against each other."""
  if not isinstance(data, dict):
    raise _error(path, None, 'the JSON is not an object with "users", ...')
  for key, typ in (('users', list), ('num_samples', list), ('user_data', dict)):
    if not isinstance(data.get(key), typ):
      raise _error(
          path, None, f'"{key}" is missing or not a JSON {typ.__name__}'
      )
  users, num_samples, user_data = (
      data['users'],
      data['num_samples'],
      data['user_data'],
  )
  seen = set()
  for user in users:
    if not isinstance(user, str):
      raise _error(path, None, f'"users" holds {user!r}, not a string')
    if user in seen:
      raise _error(path, f'user {user!r}', 'appears twice in "users"')
    seen.add(user)
  for user in user_data:
    if user not in seen:
      raise _error(
          path, f'user {user!r}', 'is in "user_data" but not in "users"'
      )
  for user in users:
    if user not in user_data:
      raise _error(
          path, f'user {user!r}', 'is in "users" but not in "user_data"'
      )
  if len(num_samples) != len(users):
    raise _error(
        path,
        None,
        f'"num_samples" has {len(num_samples)} entries for {len(users)} users',
    )
  return users, num_samples, user_data


_is_number = leaf_kinds.is_number


def _femnist_arrays(path, where, x, y) -> tuple[np.ndarray, np.ndarray]:
  """float32 `[n, 784]` and int32 `[n]` of FEMNIST rows, checked."""
  pixels = _number_rows(path, where, x, FEMNIST_PIXELS, 'FEMNIST rows have 784')
  for i, label in enumerate(y):
    if type(label) is not int:  # pylint: disable=unidiomatic-typecheck
      raise _error(
          path, where, f'y[{i}] = {label!r} is not an integer label in [0, 62)'
      )
    if not 0 <= label < FEMNIST_CLASSES:
      raise _error(path, where, f'y[{i}] = {label} is out of range [0, 62)')
  return pixels, np.asarray(y, dtype=np.int32)


def _synthetic_arrays(path, where, x, y) -> tuple[np.ndarray, np.ndarray]:
  """float32 `[n, d]` and int32 `[n]` of Synthetic rows (d: row 0's), checked.

  The width's agreement across users and files is checked by the caller.
  """
  width = len(x[0]) if isinstance(x[0], list) else 0
  if not width:
    raise _error(path, where, 'x row 0 is empty; Synthetic rows hold numbers')
  features = _number_rows(
      path, where, x, width, f'Synthetic rows here have {width} (row 0)'
  )
  for i, label in enumerate(y):
    # pylint: disable-next=unidiomatic-typecheck
    if type(label) is not int or label < 0:
      raise _error(
          path, where, f'y[{i}] = {label!r} is not an integer label >= 0'
      )
    if label >= 2**31:
      raise _error(path, where, f'y[{i}] = {label} is out of range [0, 2^31)')
  return features, np.asarray(y, dtype=np.int32)


def _number_rows(path, where, x, width: int, expected: str) -> np.ndarray:
  """float32 `[n, width]` of `x`'s rows, each `width` finite numbers."""
  for i, row in enumerate(x):
    if not isinstance(row, list) or len(row) != width:
      size = len(row) if isinstance(row, (list, str)) else type(row).__name__
      raise _error(path, where, f'x row {i} has {size} values; {expected}')
  try:
    pixels = np.asarray(x)  # float64 (or int64) for numbers only.
  except (ValueError, TypeError):
    pixels = None
  if pixels is None or pixels.dtype.kind not in 'fiu':
    i = next((i for i, row in enumerate(x) if not all(map(_is_number, row))), 0)
    raise _error(path, where, f'x row {i} holds a value that is not a number')
  pixels = pixels.astype(np.float32)
  bad = np.flatnonzero(~np.isfinite(pixels).all(axis=1))
  if bad.size:
    raise _error(path, where, f'x row {bad[0]} holds a non-finite value')
  return pixels


def iter_leaf_file(
    path: str,
    kind: str = 'auto',
    notes: Optional[leaf_kinds.LeafNotes] = None,
    inputs: leaf_kinds.ReadInputs = leaf_kinds.ReadInputs(),
) -> tuple[Optional[str], Iterator[tuple[str, np.ndarray, np.ndarray]]]:
  """Reads a LEAF JSON file: its kind and an iterator of `(user, x, y)`.

  The whole file is parsed and its structure checked at once; each user's
  rows are checked and converted (each kind's arrays: the module
  docstring) when the iterator reaches them, in the file's `users` order,
  and their Python lists are freed.

  Args:
    path: The JSON file.
    kind: One of `KINDS`, or 'auto' to recognize it from the first row.
    notes: Where what is accepted as LEAF's reader does is counted (a new
      `leaf_kinds.LeafNotes` if None).
    inputs: CelebA's images directory, Sent140's or Reddit's vocabulary.

  Returns:
    `(kind, users)`; `(None, no users)` for a file with `"users": []`.

  Raises:
    LeafDataError: One line naming the file, the user and the problem (also
      from the iterator): invalid JSON, `users` and `user_data` that
      disagree, a `num_samples` list of another length than `users`, `x` and
      `y` of different lengths, a user with no examples, rows of the wrong
      length, labels out of range, data of another kind than `kind`, or
      CelebA data without `inputs.images_dir`.
  """
  notes = leaf_kinds.LeafNotes() if notes is None else notes
  data = load_json(path)
  users, num_samples, user_data = _check_structure(path, data)
  if not users:
    notes.empty_files.append(path)
    return None, iter(())
  first = user_data[users[0]]
  if (
      isinstance(first, dict)
      and isinstance(first.get('x'), list)
      and first['x']
  ):
    found = detect_kind(path, users[0], first['x'][0], _first(first.get('y')))
  else:  # Raises the first user's problem.
    _user_arrays(path, 'femnist', users[0], notes, dict(user_data))
  if kind not in ('auto', found):
    raise _error(
        path, f'user {users[0]!r}', f'holds {found}-style data, not {kind}'
    )
  if found == 'celeba' and not inputs.images_dir:
    raise _error(
        path,
        None,
        "CelebA-style data (x image file names) need the images' directory: "
        '--leaf_images_dir (`images_dir`)',
    )

  def users_iter():
    for i, user in enumerate(users):
      if num_samples[i] != len(_rows(user_data[user])):
        notes.num_samples_users += 1
      yield (user, *_user_arrays(path, found, user, notes, user_data, inputs))

  return found, users_iter()


def _first(values: Any) -> Any:
  """`values[0]` of a non-empty list, else None."""
  return values[0] if isinstance(values, list) and values else None


def _rows(record: Any) -> Any:
  """A user record's `x` if it is a list (else `()`: `_user_arrays` raises)."""
  x = record.get('x') if isinstance(record, dict) else None
  return x if isinstance(x, list) else ()


def _user_arrays(path, kind, user, notes, user_data, inputs=None):
  """One user's checked arrays; pops the user's lists from `user_data`."""
  where = f'user {user!r}'
  record = user_data.pop(user)
  if not isinstance(record, dict):
    raise _error(path, where, 'user_data entry is not an object with x and y')
  x, y = record.get('x'), record.get('y')
  if not isinstance(x, list) or not isinstance(y, list):
    raise _error(path, where, '"x" or "y" is missing or not a JSON list')
  if len(x) != len(y):
    raise _error(path, where, f'x has {len(x)} rows but y has {len(y)} labels')
  if not x:
    raise _error(path, where, 'has no examples')
  if kind == 'auto':
    kind = detect_kind(path, user, x[0], y[0])
  if kind == 'femnist':
    return _femnist_arrays(path, where, x, y)
  if kind == 'synthetic':
    return _synthetic_arrays(path, where, x, y)
  if kind == 'sent140':
    texts = leaf_sent140.tweet_texts(path, where, x)
    return (
        leaf_sent140.encode(texts, inputs.vocabulary),
        leaf_sent140.labels(path, where, y),
    )
  if kind == 'reddit':
    return leaf_reddit.arrays(path, where, x, y, inputs.vocabulary)
  if kind == 'celeba':
    y = leaf_celeba.labels(path, where, y)
    return leaf_celeba.load_images(path, where, x, inputs.images_dir), y
  return leaf_shakespeare.arrays(path, where, x, y, notes)
