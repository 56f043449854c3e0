"""LEAF's Sent140 rows, read as LEAF's Sent140 model reads them.

LEAF's `data/sent140/preprocess/data_to_json.py` writes each tweet as `x`
row `[id, date, query, user, text, split]` (Sentiment140's CSV row without
its polarity; the `split` field is `'training'` or `'test'` of the source
file) and `y` = 1 for a positive tweet, 0 for a negative one. LEAF's stacked
LSTM (`models/sent140/stacked_lstm.py`) reads field 4, the text, and maps it
with `line_to_indices` (`models/utils/language_utils.py`): the words of
`split_line` (the regular expression `[\\w']+|[.,!?;]`: runs of word
characters and apostrophes, and the five punctuation marks as words of
their own; case kept), the first `SEQ_LENGTH` (25) of them each its id in
the vocabulary, any other word and the padding after the last word the
unknown id `len(vocabulary)`. So does `encode` here.

The vocabulary (`vocabulary`): LEAF's is the word list of its GloVe file
(`models/sent140/get_embs.py` writes `embs.json`, `{"vocab": [...], ...}`):
given as `LeafOptions.vocab_file`, either that JSON or a text file whose
lines each start with a word (GloVe's `.txt`, or a word list), ids in line
order. Without one, the training tweets' `vocab_size` most frequent words
(ties by the word), ids in that order: LEAF's embeddings need a 900 MB
download that a first run should not. Plain Python and numpy.
"""

import collections
import json
import re
from typing import Any, Iterable, Optional

import numpy as np

from tff_fedwin.data import json_limits
from tff_fedwin.data import leaf_kinds

SEQ_LENGTH = 25
TEXT_FIELD = 4
DEFAULT_VOCAB_SIZE = 10000
NUM_CLASSES = 2
# LEAF's `split_line`, verbatim.
_WORDS = re.compile(r"[\w']+|[.,!?;]")


def split_line(line: str) -> list[str]:
  """LEAF's `split_line`: the words and the marks `.,!?;`, in order."""
  return _WORDS.findall(line)


def tweet_texts(path: str, where: str, x: list) -> list[str]:
  """Field `TEXT_FIELD` of each `x` row, checked (one-line errors)."""
  texts = []
  for i, row in enumerate(x):
    if (
        not isinstance(row, list)
        or len(row) <= TEXT_FIELD
        or not isinstance(row[TEXT_FIELD], str)
    ):
      raise leaf_kinds.error(
          path,
          where,
          f'x row {i} is not a Sent140 row (a list whose field '
          f'{TEXT_FIELD} is the tweet: id, date, query, user, text, ...)',
      )
    texts.append(row[TEXT_FIELD])
  return texts


def labels(path: str, where: str, y: list) -> np.ndarray:
  """int32 `[n]` of Sent140's labels, each 0 or 1."""
  for i, label in enumerate(y):
    if type(label) is not int or label not in (0, 1):  # pylint: disable=unidiomatic-typecheck
      raise leaf_kinds.error(
          path, where, f'y[{i}] = {label!r}; Sent140 labels are 0 or 1'
      )
  return np.asarray(y, dtype=np.int32)


def encode(
    texts: Iterable[str], vocabulary: leaf_kinds.Vocabulary
) -> np.ndarray:
  """int32 `[n, SEQ_LENGTH]`: LEAF's `line_to_indices` of each text."""
  word_ids, unknown = vocabulary.word_ids, vocabulary.unknown_id
  rows = []
  for text in texts:
    ids = [word_ids.get(w, unknown) for w in split_line(text)[:SEQ_LENGTH]]
    rows.append(ids + [unknown] * (SEQ_LENGTH - len(ids)))
  return np.asarray(rows, dtype=np.int32).reshape([-1, SEQ_LENGTH])


def count_words(data: Any) -> collections.Counter:
  """The words of a parsed LEAF file's tweets (rows that are not Sent140
  rows are skipped here; the conversion refuses them)."""
  counts = collections.Counter()
  for row in leaf_kinds.x_rows(data):
    if isinstance(row, list) and len(row) > TEXT_FIELD:
      if isinstance(row[TEXT_FIELD], str):
        counts.update(split_line(row[TEXT_FIELD]))
  return counts


def most_frequent(counts: collections.Counter, size: int) -> dict[str, int]:
  """The `size` most frequent words (ties by the word) -> ids 0, 1, ..."""
  words = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:size]
  return {word: i for i, (word, _) in enumerate(words)}


def read_vocab_file(path: str) -> dict[str, int]:
  """A vocabulary file (module docstring) -> word ids in its order.

  A text file is read line by line (lines end at `\n` only), not held whole:
  GloVe's 300-dimensional `.txt` is about 1 GB.

  Raises:
    LeafDataError: One line naming the file: unreadable, not UTF-8, a JSON
      without a `"vocab"` list of strings, no word, or a word twice.
  """
  try:
    with open(path, encoding='utf-8', newline='\n') as f:
      is_json = f.read(4096).lstrip().startswith('{')
      f.seek(0)
      words = _json_vocab(path, f) if is_json else _text_words(f)
      word_ids = {}
      for i, word in enumerate(words):
        if word in word_ids:
          raise leaf_kinds.error(
              path, None, f'word {word!r} is at {word_ids[word]} and at {i}'
          )
        word_ids[word] = i
  except (OSError, UnicodeDecodeError) as e:
    raise leaf_kinds.error(
        path, None, f'cannot read the vocabulary: {e}'
    ) from None
  if not word_ids:
    raise leaf_kinds.error(path, None, 'the vocabulary holds no word')
  return word_ids


def _text_words(lines: Iterable[str]) -> Iterable[str]:
  """The first word of each line that is not blank."""
  for line in lines:
    if line.strip():
      yield line.split(maxsplit=1)[0]


def _json_vocab(path: str, f) -> list[str]:
  try:
    words = json.load(f).get('vocab')
  except (json.JSONDecodeError, AttributeError):
    words = None
  except json_limits.LIMIT_ERRORS as e:  # Deep nesting, a huge integer.
    raise leaf_kinds.error(path, None, json_limits.problem(e)) from None
  if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
    raise leaf_kinds.error(
        path,
        None,
        'a JSON vocabulary is LEAF\'s embs.json: an object whose "vocab" is '
        'a list of words',
    )
  return words


def from_words(word_ids: dict[str, int]) -> leaf_kinds.Vocabulary:
  """LEAF's Sent140 vocabulary: the unknown id (and padding) `len(words)`."""
  return leaf_kinds.Vocabulary(word_ids, len(word_ids), len(word_ids) + 1)


def vocabulary(
    parsed_train_files: Iterable[Any], options: leaf_kinds.LeafOptions
) -> leaf_kinds.Vocabulary:
  """The word ids of a Sent140 directory (module docstring).

  Args:
    parsed_train_files: The parsed training files (read only without
      `options.vocab_file`).
    options: `vocab_file` and `vocab_size`.
  """
  if options.vocab_file:
    return from_words(read_vocab_file(options.vocab_file))
  counts = collections.Counter()
  for data in parsed_train_files:
    counts.update(count_words(data))
  size: Optional[int] = options.vocab_size
  size = DEFAULT_VOCAB_SIZE if size is None else size
  return from_words(most_frequent(counts, size))
