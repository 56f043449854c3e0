"""Tokens, vocabulary and id sequences of the text task, TFF's layout.

Follows TFF's StackOverflow next-word preprocessing
(`tensorflow_federated/python/simulation/baselines/stackoverflow/
word_prediction_preprocessing.py`: `get_special_tokens`, `build_to_ids_fn`,
`batch_and_split`, `split_input_target`) with one out-of-vocabulary bucket
(TFF's default), done in numpy on the records instead of in `tf.data`.

What each piece does for a user (and why the `'words'` tokenizer gives
StackOverflow-like tokens from raw text) is in docs/data.md ("Text,
StackOverflow-style"); precisely:

* Tokens (`tokenize`), word level, by `tokenizer` (`TOKENIZERS`): `'words'`
  lowercases the text (`str.lower`), then every run of word characters
  (Unicode letters, digits, `_`) with the apostrophes inside it is a token,
  and every other non-whitespace character a token of its own;
  `'whitespace'` is `text.split()` and nothing else. Char level: every
  Unicode code point, whitespace included; `tokenizer` plays no part.
* Vocabulary (`build_vocabulary`): the `vocab_size` most frequent tokens of
  all the training texts' tokens (before any cut to the sequence length),
  ties by first occurrence; fewer distinct tokens give a smaller `V`.
* Ids (TFF's `get_special_tokens` with one OOV bucket): `PAD_ID = 0`, the
  tokens `1..V` in vocabulary order, OOV `V + 1`, BOS `V + 2`, EOS `V + 3`.
* Sequences (`text_to_sequences`), `L = sequence_length`, `x = seq[:-1]`,
  `y = seq[1:]`: word level, TFF's `to_ids` per text, `[BOS] + ids[:L]`,
  then `[EOS]` only if the text had fewer than `L` tokens, padded with
  `PAD_ID` to `L + 1` (longer texts are cut); char level, as TFF's
  Shakespeare baseline packs characters, `[BOS] + ids + [EOS]` cut into
  consecutive chunks of `L + 1`, the last padded (no text is cut off:
  `ceil((len + 2) / (L + 1))` examples).

BOS is never a target (it is only ever the first input token) and padding
only follows EOS (or the end of a cut text), so a padded input always has a
padded target.
"""

import collections
import math
import re
from collections.abc import Iterable, Sequence

import attrs
import numpy as np

from tff_fedwin import checks

LEVELS = ('word', 'char')
TOKENIZERS = ('words', 'whitespace')
# Word characters with inner apostrophes (ASCII ' and U+2019), or any other
# non-space character on its own.
_WORDS = re.compile(r"\w+(?:['\u2019]\w+)*|[^\w\s]")
PAD_ID = 0
# Ids after the vocabulary's V tokens: OOV = V + 1, BOS = V + 2, EOS = V + 3.
NUM_SPECIAL_IDS = 4


def check_level(level: str) -> str:
  """Returns `level` if it is one of `LEVELS`, else raises ValueError."""
  if level not in LEVELS:
    raise ValueError(f'`level` must be one of {LEVELS}, got {level!r}.')
  return level


def check_tokenizer(tokenizer: str) -> str:
  """Returns `tokenizer` if it is one of `TOKENIZERS`, else raises ValueError."""
  if tokenizer not in TOKENIZERS:
    raise ValueError(
        f'`tokenizer` must be one of {TOKENIZERS}, got {tokenizer!r}.'
    )
  return tokenizer


def tokenize(
    text: str, level: str = 'word', tokenizer: str = 'words'
) -> list[str]:
  """The tokens of `text` at `level`, words by `tokenizer` (module docstring)."""
  if check_level(level) == 'char':
    return list(text)
  if check_tokenizer(tokenizer) == 'whitespace':
    return text.split()
  return _WORDS.findall(text.lower())


@attrs.frozen
class Vocabulary:
  """Tokens `1..V` of the id space, and the special ids after them.

  Attributes:
    tokens: The vocabulary's tokens, token `tokens[i]` has id `i + 1`.
    level: `'word'` or `'char'`, how texts are tokenized.
    tokenizer: One of `TOKENIZERS`, how words are told apart.
  """

  tokens: tuple[str, ...]
  level: str = 'word'
  tokenizer: str = 'words'
  _ids: dict[str, int] = attrs.field(
      init=False,
      eq=False,
      repr=False,
      default=attrs.Factory(
          lambda self: {t: i + 1 for i, t in enumerate(self.tokens)},
          takes_self=True,
      ),
  )

  @property
  def oov_id(self) -> int:
    return len(self.tokens) + 1

  @property
  def bos_id(self) -> int:
    return len(self.tokens) + 2

  @property
  def eos_id(self) -> int:
    return len(self.tokens) + 3

  @property
  def num_ids(self) -> int:
    """Size of the id space, `V + 4`: the model's number of logits."""
    return len(self.tokens) + NUM_SPECIAL_IDS

  def ids(self, tokens: Iterable[str]) -> list[int]:
    """The id of each token (`oov_id` for tokens not in the vocabulary)."""
    return [self._ids.get(t, self.oov_id) for t in tokens]


def build_vocabulary(
    texts: Iterable[str],
    *,
    vocab_size: int,
    level: str = 'word',
    tokenizer: str = 'words',
) -> Vocabulary:
  """The `vocab_size` most frequent tokens of `texts` (module docstring).

  Args:
    texts: The training texts, in order (the order breaks count ties).
    vocab_size: The largest vocabulary, >= 1.
    level: One of `LEVELS`.
    tokenizer: One of `TOKENIZERS` (word level).

  Returns:
    The `Vocabulary`: tokens by count, descending, then first occurrence.

  Raises:
    ValueError: If `vocab_size` is not a positive integer, `level` is not in
      `LEVELS`, `tokenizer` not in `TOKENIZERS`, or the texts have no token.
  """
  vocab_size = checks.check_int('vocab_size', vocab_size, minimum=1)
  check_level(level)
  check_tokenizer(tokenizer)
  counts = collections.Counter()
  for text in texts:
    counts.update(tokenize(text, level, tokenizer))
  if not counts:
    raise ValueError(f'The training texts have no {level} token.')
  # Counter keeps first-insertion order; sorted() is stable.
  ranked = sorted(counts, key=lambda t: -counts[t])
  return Vocabulary(tuple(ranked[:vocab_size]), level, tokenizer)


def text_to_sequences(
    text: str, vocab: Vocabulary, sequence_length: int
) -> tuple[np.ndarray, np.ndarray]:
  """`(x, y)` int32 `[n, sequence_length]` examples of one text.

  Word level: `n = 1`; char level: `n = ceil((len + 2) / (L + 1))` (module
  docstring).
  """
  length = checks.check_int('sequence_length', sequence_length, minimum=1)
  ids = vocab.ids(tokenize(text, vocab.level, vocab.tokenizer))
  if vocab.level == 'word':
    stream = [vocab.bos_id] + ids[:length]
    if len(ids) < length:
      stream.append(vocab.eos_id)
  else:
    stream = [vocab.bos_id] + ids + [vocab.eos_id]
  width = length + 1
  num_examples = math.ceil(len(stream) / width)
  chunks = np.full([num_examples * width], PAD_ID, np.int32)
  chunks[: len(stream)] = stream
  chunks = chunks.reshape([num_examples, width])
  return chunks[:, :-1], chunks[:, 1:]


def texts_to_arrays(
    texts: Sequence[str],
    vocab: Vocabulary,
    sequence_length: int,
    *,
    return_counts: bool = False,
) -> tuple[np.ndarray, ...]:
  """`(x, y)` of all `texts`' examples, concatenated in order.

  Shapes `[num_examples, sequence_length]`, int32; zero rows for no texts.
  With `return_counts`, `(x, y, counts)`: int64 `[len(texts)]`, each text's
  examples.
  """
  length = checks.check_int('sequence_length', sequence_length, minimum=1)
  pieces = [text_to_sequences(t, vocab, length) for t in texts]
  counts = np.array([len(x) for x, _ in pieces], np.int64)
  if not pieces:
    empty = np.zeros([0, length], np.int32)
    arrays = (empty, empty.copy())
  else:
    arrays = (
        np.concatenate([x for x, _ in pieces]),
        np.concatenate([y for _, y in pieces]),
    )
  return (*arrays, counts) if return_counts else arrays
