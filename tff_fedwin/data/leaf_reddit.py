"""LEAF's Reddit rows, read as LEAF's Reddit model reads them.

LEAF's `data/reddit/source/preprocess.py` writes each user's comments, in
time order, cut into sequences of `SEQ_LENGTH` (10) tokens: `x` is a list
of comments, each a list of input sequences (`<BOS>`, the comment's tokens,
`<EOS>`, then `<PAD>` to a multiple of 10); `y` a list of objects, one per
comment, whose `target_tokens` are the same sequences shifted by one (the
tokens, `<EOS>`, `<PAD>`) and whose `count_tokens` are 1 where the input is
not `<PAD>`. LEAF's model (`models/reddit/stacked_lstm.py`) trains on the
sequences one by one; so does this package: each sequence is one example,
int32 ids `[10]` in and `[10]` out, the ids of LEAF's vocabulary.

The targets are kept where `count_tokens` is 1, and are `pad_id` where it is
0 (`count_tokens` must be 1 exactly where the input is not `<PAD>`, or the
row is refused). So the position after `<EOS>`, whose target is `<PAD>`, is
padding here; LEAF's loss scores it and its accuracy counts it as wrong.

The vocabulary (`Vocabulary`): LEAF's pickle (`build_vocab.py` writes
`reddit_vocab.pck`, `{"vocab": {token: id}, "size", "unk_symbol",
"pad_symbol"}`), given as `LeafOptions.vocab_file` and read with an
unpickler that refuses every class and function (`read_vocab_pickle`: only
dicts, strings and numbers load; nothing the file names runs). Without one,
the vocabulary `build_vocab.py --vocab-size N` would write from the training
files, built here the same way (`build_vocab`). A token outside it is
`unk_symbol`, as LEAF's `defaultdict` maps it.
"""

import collections
import io
import pickle
from typing import Any, Iterable, Optional

import numpy as np

from tff_fedwin.data import leaf_kinds

SEQ_LENGTH = 10
DEFAULT_VOCAB_SIZE = 10000
PAD = '<PAD>'


class _NoObjectsUnpickler(pickle.Unpickler):
  """Loads dicts, lists, strings and numbers; any class or function is
  refused before it is looked up (so nothing the file names is run)."""

  def find_class(self, module, name):
    raise pickle.UnpicklingError(
        f'it names {module}.{name}; a vocabulary pickle holds only dicts, '
        'strings and numbers'
    )


def read_vocab_pickle(path: str) -> leaf_kinds.Vocabulary:
  """LEAF's `reddit_vocab.pck` as a `Vocabulary` (one-line errors)."""
  try:
    with open(path, 'rb') as f:
      data = _NoObjectsUnpickler(io.BytesIO(f.read())).load()
  except (OSError, pickle.UnpicklingError, EOFError, ValueError) as e:
    raise leaf_kinds.error(
        path, None, f'not a LEAF Reddit vocabulary pickle: {e}'
    ) from None
  expected = '{"vocab": {token: id}, "size", "unk_symbol", "pad_symbol"}'
  if not isinstance(data, dict) or not all(
      k in data for k in ('vocab', 'size', 'unk_symbol', 'pad_symbol')
  ):
    raise leaf_kinds.error(
        path, None, f'a LEAF Reddit vocabulary is {expected}'
    )
  vocab, size = data['vocab'], data['size']
  ids = (data['unk_symbol'], data['pad_symbol'])
  if (
      not isinstance(vocab, dict)
      or type(size) is not int  # pylint: disable=unidiomatic-typecheck
      or not all(isinstance(k, str) for k in vocab)
      or not all(type(i) is int and 0 <= i < size for i in (*vocab.values(), *ids))  # pylint: disable=unidiomatic-typecheck
  ):
    raise leaf_kinds.error(
        path, None, f'{expected} with integer ids in [0, size)'
    )
  return leaf_kinds.Vocabulary(dict(vocab), ids[0], size, pad_id=ids[1])


def build_vocab(
    parsed_train_files: Iterable[Any], size: Optional[int]
) -> leaf_kinds.Vocabulary:
  """What LEAF's `data/reddit/build_vocab.py --vocab-size size` writes.

  Its token counts over every `x` sequence (padding included), sorted by
  count then token, the first `size - 2`; `<PAD>` 0, `<UNK>` 1, the i-th
  token `i + 1` unless it is `<PAD>` (as written: when `<PAD>` is the most
  frequent, as in LEAF's data, the ids are 2.. and id `size - 1` is unused).
  """
  size = DEFAULT_VOCAB_SIZE if size is None else size
  counts = collections.Counter()
  for data in parsed_train_files:
    for comment in leaf_kinds.x_rows(data):
      for sequence in comment if isinstance(comment, list) else ():
        if isinstance(sequence, list):
          counts.update(t for t in sequence if isinstance(t, str))
  pairs = sorted(counts.items(), key=lambda x: (-x[1], x[0]))[: size - 2]
  vocab = {PAD: 0, '<UNK>': 1}
  for i, (token, _) in enumerate(pairs):
    if token != PAD:
      vocab[token] = i + 1
  return leaf_kinds.Vocabulary(vocab, 1, size, pad_id=0)


def _sequences(path: str, where: str, x: list, y: list):
  """Every comment's (input, target, count) sequences, in order, checked."""
  for i, (comment, label) in enumerate(zip(x, y)):
    targets = label.get('target_tokens') if isinstance(label, dict) else None
    counts = label.get('count_tokens') if isinstance(label, dict) else None
    if not all(isinstance(v, list) for v in (comment, targets, counts)) or (
        not len(comment) == len(targets) == len(counts)
    ):
      raise leaf_kinds.error(
          path,
          where,
          f"comment {i}: x is not a list of sequences with y's "
          "target_tokens and count_tokens of its length (LEAF's Reddit "
          'layout)',
      )
    for j, parts in enumerate(zip(comment, targets, counts)):
      if not all(
          isinstance(p, list) and len(p) == SEQ_LENGTH for p in parts
      ) or not all(isinstance(t, str) for t in (*parts[0], *parts[1])):
        raise leaf_kinds.error(
            path,
            where,
            f'comment {i}, sequence {j}: x, target_tokens and count_tokens '
            f'hold {SEQ_LENGTH} tokens (and counts) each',
        )
      if [c == 1 for c in parts[2]] != [t != PAD for t in parts[0]]:
        raise leaf_kinds.error(
            path,
            where,
            f'comment {i}, sequence {j}: count_tokens is not 1 exactly where '
            f'x is not {PAD}',
        )
      yield parts


def arrays(
    path: str, where: str, x: list, y: list, vocab: leaf_kinds.Vocabulary
) -> tuple[np.ndarray, np.ndarray]:
  """int32 `[n, 10]` input ids and `[n, 10]` target ids (`pad_id` where
  `count_tokens` is 0) of a user's `n` sequences."""
  ids, unknown = vocab.word_ids, vocab.unknown_id
  inputs, targets = [], []
  for tokens, target, counts in _sequences(path, where, x, y):
    inputs.append([ids.get(t, unknown) for t in tokens])
    targets.append(
        [
            ids.get(t, unknown) if c == 1 else vocab.pad_id
            for t, c in zip(target, counts)
        ]
    )
  if not inputs:
    raise leaf_kinds.error(path, where, 'has no sequences')
  return np.asarray(inputs, np.int32), np.asarray(targets, np.int32)
