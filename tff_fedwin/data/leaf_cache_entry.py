"""One conversion in the LEAF cache: what it holds, read back from disk.

`LeafCache` describes a complete conversion (`leaf_cache`'s layout);
`from_index` reads it from its `index.json`, checking the format, the key,
the converter's version and every file's size. A missing file means a
damaged conversion (None: converted again); any other read error is
`leaf_cache_trust.unreadable`'s one line, and the entry is left.
"""

import json
import os
from typing import Optional

import attrs
import numpy as np

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache_trust as trust
from tff_fedwin.data import leaf_convert

FORMAT = 1
INDEX = 'index.json'
client_file_name = leaf_convert.client_file_name
record_bytes = leaf_convert.record_bytes


@attrs.frozen(eq=False)  # An array field: compared by identity.
class LeafCache:
  """A complete conversion of a LEAF directory (see the module docstring).

  Attributes:
    directory: The conversion's absolute directory.
    kind: One of `choices.LEAF_DATA_KINDS`.
    client_ids: The training clients, sorted.
    num_examples: Each training client's example count, in that order.
    class_counts: int64 `[num_clients, num_classes]`: each training client's
      label counts (femnist: 62 classes; shakespeare: the next character's
      id, `leaf.SHAKESPEARE_VOCAB_SIZE`; sent140, celeba: 2); reddit
      `[num_clients, 0]` (its labels are token sequences).
    num_test_examples: Examples of the pooled test split.
    converted: Whether this call converted it (False: found in the cache).
    warnings: What the read accepted as LEAF's reader does
      (`leaf_kinds.LeafNotes.messages`), one line each.
    x_width: The values of every x row (784, 80, or Synthetic's width).
    test_users: The test users and their example counts, in the pooled test
      split's order.
    vocab_size: Sent140, Reddit: the ids of its vocabulary, `0..vocab_size -
      1` (Sent140: its words, then the unknown word); 0 for the others.
    pad_id: Reddit: the padding's id; -1 for the others.
    unknown_id: Sent140, Reddit: the unknown word's id; -1 for the others.
  """

  directory: str
  kind: str
  client_ids: tuple[str, ...]
  num_examples: tuple[int, ...]
  class_counts: np.ndarray
  num_test_examples: int
  converted: bool
  warnings: tuple[str, ...] = ()
  x_width: int = leaf.FEMNIST_PIXELS
  test_users: tuple[tuple[str, int], ...] = ()
  vocab_size: int = 0
  pad_id: int = -1
  unknown_id: int = -1

  @property
  def num_classes(self) -> int:
    """The labels' classes (62, 81, 2, Synthetic's 1 + the largest label,
    or Reddit's vocabulary size)."""
    if self.kind == 'reddit':
      return self.vocab_size
    return self.class_counts.shape[1]

  def client_files(self, client_id: str) -> tuple[str, str]:
    """The `.x` and `.y` files of a training client."""
    base = os.path.join(self.directory, 'train', client_file_name(client_id))
    return base + '.x', base + '.y'


def from_index(directory: str, key: str) -> Optional[LeafCache]:
  """The conversion in `directory` if complete and intact, else None.

  Raises:
    LeafCacheError: A read error other than a missing file (the entry is
      left as it is).
  """
  try:
    return read_index(directory, key)
  except OSError as e:
    if e.errno in trust.DAMAGE_ERRNOS:
      return None
    raise trust.unreadable(directory, e) from None
  except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
    return None


def read_index(directory: str, key: str) -> Optional[LeafCache]:
  """`from_index`'s conversion, None if damaged; raises its OSErrors."""
  with open(os.path.join(directory, INDEX)) as f:
    index = json.load(f)
  if (
      index.get('format') != FORMAT
      or index.get('key') != key
      or index.get('converter') != leaf_convert.CONVERTER_VERSION
  ):
    return None
  cache = LeafCache(
      directory,
      index['kind'],
      tuple(index['client_ids']),
      tuple(index['num_examples']),
      np.asarray(index['class_counts'], np.int64),
      index['num_test_examples'],
      converted=False,
      warnings=tuple(index.get('warnings', ())),
      # An index written before Synthetic: the kind's fixed layout.
      x_width=index.get('x_width', leaf_convert.LAYOUT[index['kind']][0]),
      test_users=tuple((str(u), int(n)) for u, n in index['test_users']),
      vocab_size=index.get('vocab_size', 0),
      pad_id=index.get('pad_id', -1),
      unknown_id=index.get('unknown_id', -1),
  )
  if sum(n for _, n in cache.test_users) != cache.num_test_examples:
    return None
  x_bytes, y_bytes = record_bytes(cache.kind, cache.x_width)
  for client_id, n in zip(cache.client_ids, cache.num_examples):
    x_path, y_path = cache.client_files(client_id)
    if (os.path.getsize(x_path), os.path.getsize(y_path)) != (
        n * x_bytes,
        n * y_bytes,
    ):
      return None
  n = cache.num_test_examples
  if (
      os.path.getsize(os.path.join(directory, 'test.x')) != n * x_bytes
      or os.path.getsize(os.path.join(directory, 'test.y')) != n * y_bytes
  ):
    return None
  return cache
