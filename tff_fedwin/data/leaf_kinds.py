"""Which of LEAF's six datasets a JSON file holds, from its first row.

LEAF's datasets differ in what an `x` row and a `y` label are
(`tff_fedwin.data.leaf` reads the supported ones):

* `femnist`: a list of 784 numbers all in `[0, 1]` (a 28x28 image).
* `synthetic`: any other list of numbers (LEAF's `data/synthetic` generator
  draws Gaussian features of any `-num-dim`, 784 included; outside `[0, 1]`).
* `shakespeare`: a string (80 characters), `y` a string (the next one).
* `celeba`: a string that is an image file name, or whose `y` is a number.
* `sent140`: a list ending in a string (the tweet, after its metadata).
* `reddit`: a list of token lists, or a `y` that is an object.

`kind_of` decides from one row and its label; plain Python, no numpy.
`LeafOptions` holds what three kinds need beside the JSON: CelebA its images,
Sent140 and Reddit their vocabulary (`Vocabulary`); `LeafNotes` counts what a
read accepted as LEAF's own reader does.
"""

from collections.abc import Iterator
from typing import Any, Optional

import attrs

from tff_fedwin import errors

KINDS = ('femnist', 'shakespeare', 'synthetic', 'sent140', 'celeba', 'reddit')
# Each kind as LEAF's paper spells the dataset.
NAMES = {
    'femnist': 'FEMNIST',
    'shakespeare': 'Shakespeare',
    'synthetic': 'Synthetic',
    'sent140': 'Sent140',
    'celeba': 'CelebA',
    'reddit': 'Reddit',
}
FEMNIST_PIXELS = 784
_IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png')


class LeafDataError(errors.InputError):
  """A LEAF directory or file that cannot be read.

  The message is one line naming the file, the user (or index) and the
  problem.
  """


def error(path: str, where: Optional[str], problem: str) -> LeafDataError:
  """The one-line `LeafDataError` of `problem` at `path` (and `where`)."""
  where = f'{where}: ' if where else ''
  return LeafDataError(f'{path}: {where}{problem}'.replace('\n', '\\n'))


def is_number(value: Any) -> bool:
  """A JSON number numpy reads as one (no bool, no int beyond int64)."""
  if isinstance(value, float):
    return True
  return (
      isinstance(value, int)
      and not isinstance(value, bool)
      and abs(value) < 2**63
  )


def x_rows(data: Any) -> Iterator[Any]:
  """Every user's `x` rows of a parsed LEAF file, skipping what is not
  LEAF's layout (the conversion refuses it; a vocabulary count only reads)."""
  user_data = data.get('user_data') if isinstance(data, dict) else None
  for record in (user_data if isinstance(user_data, dict) else {}).values():
    rows = record.get('x') if isinstance(record, dict) else None
    yield from rows if isinstance(rows, list) else ()


def kind_of(row: Any, label: Any = None) -> Optional[str]:
  """The kind (one of `KINDS`) of an `x` row and its `y` label (module
  docstring); None for a row that is neither a list nor a string."""
  if isinstance(label, dict):
    return 'reddit'
  if isinstance(row, str):
    if isinstance(label, str):
      return 'shakespeare'
    if row.lower().endswith(_IMAGE_SUFFIXES) or is_number(label):
      return 'celeba'
    return 'shakespeare'
  if not isinstance(row, list):
    return None
  if row and isinstance(row[0], list):
    return 'reddit'
  if row and isinstance(row[-1], str):
    return 'sent140'
  if not all(map(is_number, row)):
    return 'femnist'  # FEMNIST's checks name the value that is not a number.
  image = len(row) == FEMNIST_PIXELS and all(0 <= v <= 1 for v in row)
  return 'femnist' if image else 'synthetic'


@attrs.frozen
class LeafOptions:
  """What CelebA- and Sent140-style data need beside their JSON files.

  Hashable (`tff_fedwin.data.preloaded` keys on it); part of the cache key
  (`leaf_cache`), so other options mean another conversion.

  Attributes:
    images_dir: CelebA: the directory the `x` file names are in (LEAF's
      `data/celeba/data/raw/img_align_celeba`); required for CelebA, refused
      for the other kinds.
    vocab_file: Sent140: LEAF's `embs.json` (its `"vocab"` list) or a text
      file whose lines start with a word (a word list, GloVe's `.txt`); the
      word ids are the line order. Reddit: LEAF's `reddit_vocab.pck`. None:
      built from the training files (`leaf_sent140`, `leaf_reddit`).
    vocab_size: Sent140 and Reddit without `vocab_file`: the vocabulary's
      size (None: 10,000).
    eval_dir: The folder of the evaluation split: None for `test/`, or
      `'val'` for LEAF's Reddit `val/` (any kind's `val/` is read alike).
  """

  images_dir: Optional[str] = None
  vocab_file: Optional[str] = None
  vocab_size: Optional[int] = None
  eval_dir: Optional[str] = None

  def given(self) -> dict[str, Any]:
    """The options that are set, by name."""
    return {k: v for k, v in attrs.asdict(self).items() if v is not None}


@attrs.frozen(eq=False)
class Vocabulary:
  """Token ids of Sent140's or Reddit's inputs.

  Attributes:
    word_ids: token -> id.
    unknown_id: The id of any other token.
    size: The ids used: `0..size - 1` (Sent140: the words and the unknown
      id; Reddit: the pickle's `size`).
    pad_id: Reddit: the padding's id (`pad_symbol`); -1 for Sent140, whose
      padding is the unknown id.
  """

  word_ids: dict[str, int]
  unknown_id: int
  size: int
  pad_id: int = -1


@attrs.frozen(eq=False)
class ReadInputs:
  """What a file's reader needs beside the file (`leaf.iter_leaf_file`).

  Attributes:
    images_dir: CelebA: `LeafOptions.images_dir`.
    vocabulary: Sent140, Reddit: the directory's vocabulary.
  """

  images_dir: Optional[str] = None
  vocabulary: Optional[Vocabulary] = None


@attrs.define
class LeafNotes:
  """What a LEAF read accepted as LEAF's own reader does, counted.

  What LEAF's scripts write and LEAF's reader (`models/utils/model_utils.py`,
  `language_utils.py`) accepts but a strict check would refuse, counted by
  `tff_fedwin.data.leaf` while it reads; `messages` makes one warning line
  of each (`tff_fedwin.data.leaf_cache` stores them in its index and logs
  them at every start).

  Attributes:
    num_samples_users: Users whose `num_samples` is not their `len(x)`.
    empty_files: Files with `"users": []`, skipped.
    unknown_x: Characters of `x` outside `ALL_LETTERS` (read as id 0).
    unknown_y: Labels `y` outside `ALL_LETTERS` (read as `'}'`, id 80).
  """

  num_samples_users: int = 0
  empty_files: list[str] = attrs.Factory(list)
  unknown_x: int = 0
  unknown_y: int = 0

  def messages(self) -> list[str]:
    """One warning line per kind of note, none when there is nothing."""
    lines = []
    if self.num_samples_users:
      lines.append(
          f'{self.num_samples_users} LEAF user(s) have a "num_samples" other '
          "than their number of x rows (LEAF's scripts write such counts: "
          "Shakespeare's by-sample split for every test user, Reddit's "
          "preprocess.py each user's comments of all splits); their x rows "
          "are used, as LEAF's reader does"
      )
    if self.empty_files:
      lines.append(
          f'{len(self.empty_files)} LEAF file(s) with "users": [] skipped '
          f'(LEAF writes them when -k removes every user): '
          + ', '.join(self.empty_files)
      )
    if self.unknown_x or self.unknown_y:
      lines.append(
          f'{self.unknown_x} x character(s) and {self.unknown_y} y '
          "character(s) are outside LEAF's Shakespeare ALL_LETTERS: read as "
          "LEAF's reader reads them (x: find() = -1, id 0; y: the one-hot at "
          "index -1, '}')"
      )
    return lines
