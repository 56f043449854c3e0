"""A LEAF directory converted once into per-client binary files, read by id.

`load_leaf_cache(data_dir, kind, cache_dir)` checks and converts the LEAF
JSON (`tff_fedwin.data.leaf`) on the first start, one file at a time, into
`<cache_dir>/<key>/`; later starts find it there and parse nothing. The key
is a digest of every JSON file's name, size, modification time (ns) and
CRC-32 (read streaming), so a changed or damaged file means a new
conversion. Layout of a conversion:

* `train/<name>.x`, `train/<name>.y`: one training client's raw examples,
  `<name>` the client id in URL-safe base64 without padding (what
  `tf.io.encode_base64` writes, so the workers find the file from the id);
  femnist: float32 `[n, 784]` and int32 `[n]`; shakespeare: uint8 `[n, 80]`
  and uint8 `[n]` (`leaf.py`'s ids). Little-endian.
* `test.x`, `test.y`: the test split pooled, the same records, test files in
  name order and users in each file's order.
* `index.json`, written last: the key, the kind, the training client ids in
  sorted order, their example and class counts, the test size, and the
  warnings of the read (`leaf_notes.LeafNotes`), logged again by every load.

A conversion is written in a temporary directory beside it and renamed into
place when complete, so a killed conversion is never used (its temporary
directory is left behind, and ignored); a cache whose index or file sizes do
not match is converted again. The workers read the files, so they must see
`cache_dir` (local workers, or a shared file system).

`tff_fedwin.data.leaf_client_data` reads it with TensorFlow ops.
"""

import base64
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from typing import Optional

from absl import logging
import attrs
import numpy as np

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_notes

FORMAT = 1
INDEX = 'index.json'
LeafDataError = leaf.LeafDataError
# Per kind: (x record shape, x dtype, y dtype, number of classes).
_LAYOUT = {
    'femnist': ((leaf.FEMNIST_PIXELS,), '<f4', '<i4', leaf.FEMNIST_CLASSES),
    'shakespeare': (
        (leaf.SHAKESPEARE_SEQ_LENGTH,),
        'u1',
        'u1',
        leaf.SHAKESPEARE_VOCAB_SIZE,
    ),
}
_NAME_MAX = 200
_CRC_CHUNK = 4 * 2**20


def default_cache_dir() -> str:
  """`~/.cache/tff_fedwin/leaf`."""
  return os.path.join(os.path.expanduser('~'), '.cache', 'tff_fedwin', 'leaf')


def client_file_name(client_id: str) -> str:
  """URL-safe base64 of the id's UTF-8, no padding (`tf.io.encode_base64`)."""
  return (
      base64.urlsafe_b64encode(client_id.encode('utf-8')).decode().rstrip('=')
  )


def _crc32(path: str) -> int:
  crc = 0
  with open(path, 'rb') as f:
    while chunk := f.read(_CRC_CHUNK):
      crc = zlib.crc32(chunk, crc)
  return crc


def source_key(data_dir: str) -> tuple[str, dict[str, list[str]]]:
  """The cache key of `data_dir` and its JSON files per split.

  Raises:
    LeafDataError: If `train/` or `test/` is missing or holds no `.json`.
  """
  files = {
      split: leaf.leaf_json_files(data_dir, split) for split in leaf.SPLITS
  }
  records = [FORMAT]
  for split, paths in files.items():
    for path in paths:
      stat = os.stat(path)
      records.append(
          [split, os.path.basename(path), stat.st_size, stat.st_mtime_ns]
          + [_crc32(path)]
      )
  digest = hashlib.sha256(json.dumps(records).encode()).hexdigest()
  return digest[:32], files


@attrs.frozen(eq=False)  # An array field: compared by identity.
class LeafCache:
  """A complete conversion of a LEAF directory (see the module docstring).

  Attributes:
    directory: The conversion's absolute directory.
    kind: 'femnist' or 'shakespeare'.
    client_ids: The training clients, sorted.
    num_examples: Each training client's example count, in that order.
    class_counts: int64 `[num_clients, num_classes]`: each training client's
      label counts (femnist: 62 classes; shakespeare: the next character's
      id, `leaf.SHAKESPEARE_VOCAB_SIZE`).
    num_test_examples: Examples of the pooled test split.
    converted: Whether this call converted it (False: found in the cache).
    warnings: What the read accepted as LEAF's reader does
      (`leaf_notes.LeafNotes.messages`), one line each.
  """

  directory: str
  kind: str
  client_ids: tuple[str, ...]
  num_examples: tuple[int, ...]
  class_counts: np.ndarray
  num_test_examples: int
  converted: bool
  warnings: tuple[str, ...] = ()

  def client_files(self, client_id: str) -> tuple[str, str]:
    """The `.x` and `.y` files of a training client."""
    base = os.path.join(self.directory, 'train', client_file_name(client_id))
    return base + '.x', base + '.y'


def record_bytes(kind: str) -> tuple[int, int]:
  shape, x_dtype, y_dtype, _ = _LAYOUT[kind]
  return (
      int(np.prod(shape)) * np.dtype(x_dtype).itemsize,
      np.dtype(y_dtype).itemsize,
  )


def _from_index(directory: str, key: str) -> Optional[LeafCache]:
  """The conversion in `directory` if complete and intact, else None."""
  try:
    with open(os.path.join(directory, INDEX)) as f:
      index = json.load(f)
    if index.get('format') != FORMAT or index.get('key') != key:
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
    )
    x_bytes, y_bytes = record_bytes(cache.kind)
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
  except (OSError, ValueError, KeyError, TypeError):
    return None


class _KindCheck:
  """One kind across a directory's files: the first file's."""

  def __init__(self, kind: str):
    self.requested = kind
    self.kind = None
    self.first_path = None

  def check(self, path: str, found: Optional[str]) -> Optional[str]:
    if found is None:  # A file with no users.
      return None
    if self.kind is None:
      self.kind, self.first_path = found, path
    elif found != self.kind:
      raise leaf.LeafDataError(
          f'{path}: holds {found}-style data but {self.first_path} holds '
          f'{self.kind}-style data; a LEAF directory holds one kind'
      )
    return found


def _convert_split(paths, kinds: _KindCheck, notes, out_dir, train: bool):
  """Writes a split's users; returns (ids, counts, class counts, total)."""
  ids, counts, class_counts, seen = [], [], [], {}
  total = 0
  test_files = None
  if not train:
    test_files = (
        open(os.path.join(out_dir, 'test.x'), 'wb'),
        open(os.path.join(out_dir, 'test.y'), 'wb'),
    )
  try:
    for path in paths:
      found, users = leaf.iter_leaf_file(path, kinds.requested, notes)
      kind = kinds.check(path, found)
      if kind is None:
        continue
      _, x_dtype, y_dtype, num_classes = _LAYOUT[kind]
      for user, x, y in users:
        if user in seen:
          raise leaf.LeafDataError(
              f'{path}: user {user!r}: appears in {seen[user]} too'
          )
        seen[user] = path
        x, y = x.astype(x_dtype, copy=False), y.astype(y_dtype, copy=False)
        total += len(y)
        if train:
          name = client_file_name(user)
          if len(name) > _NAME_MAX:
            raise leaf.LeafDataError(
                f'{path}: user {user[:40]!r}...: the id is too long for a '
                'file name (at most 150 bytes of UTF-8)'
            )
          x.tofile(os.path.join(out_dir, 'train', name + '.x'))
          y.tofile(os.path.join(out_dir, 'train', name + '.y'))
          ids.append(user)
          counts.append(len(y))
          class_counts.append(np.bincount(y, minlength=num_classes).tolist())
        else:
          x.tofile(test_files[0])
          y.tofile(test_files[1])
  finally:
    if test_files:
      for f in test_files:
        f.close()
  if not total:
    raise leaf.LeafDataError(
        f'{os.path.dirname(paths[0])}: no user in any .json file (each has '
        '"users": []); a LEAF split needs at least one user'
    )
  return ids, counts, class_counts, total


def _convert(files, kind, key, directory) -> LeafCache:
  """Converts into a temporary directory, then renames it to `directory`."""
  root = os.path.dirname(directory)
  os.makedirs(root, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f'.{key}.tmp-', dir=root)
  try:
    os.mkdir(os.path.join(tmp, 'train'))
    kinds, notes = _KindCheck(kind), leaf_notes.LeafNotes()
    ids, counts, class_counts, _ = _convert_split(
        files['train'], kinds, notes, tmp, train=True
    )
    *_, num_test = _convert_split(files['test'], kinds, notes, tmp, train=False)
    kind = kinds.kind
    order = sorted(range(len(ids)), key=ids.__getitem__)
    index = {
        'format': FORMAT,
        'key': key,
        'kind': kind,
        'client_ids': [ids[i] for i in order],
        'num_examples': [counts[i] for i in order],
        'class_counts': [class_counts[i] for i in order],
        'num_test_examples': num_test,
        'warnings': notes.messages(),
    }
    with open(os.path.join(tmp, INDEX), 'w') as f:
      json.dump(index, f)
      f.flush()
      os.fsync(f.fileno())
    try:
      os.rename(tmp, directory)
    except OSError:
      # Another process completed the same conversion first: use its.
      shutil.rmtree(tmp, ignore_errors=True)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  cache = _from_index(directory, key)
  if cache is None:
    raise OSError(f'{directory}: the LEAF conversion just written is damaged')
  return attrs.evolve(cache, converted=True)


def load_leaf_cache(
    data_dir: str, kind: str = 'auto', cache_dir: Optional[str] = None
) -> LeafCache:
  """The conversion of `data_dir`: found in `cache_dir`, or made now.

  Checks the whole directory on conversion (no TensorFlow work); a cache hit
  reads only the index, the file sizes and the JSON files' bytes (for the
  key's CRC-32s).

  Args:
    data_dir: A LEAF directory with `train/*.json` and `test/*.json`.
    kind: 'auto' (recognized from the data), or one of `leaf.KINDS`.
    cache_dir: Where conversions live; None for `default_cache_dir()`.

  Returns:
    The `LeafCache`.

  Raises:
    LeafDataError: One line naming the file, the user and the problem; also
      for a `kind` the data do not hold, or an unknown `kind`. What LEAF's
      reader accepts is accepted; each of `LeafCache.warnings` is logged.
  """
  if kind not in ('auto', *leaf.KINDS):
    raise leaf.LeafDataError(
        f'`leaf_kind` must be one of {("auto", *leaf.KINDS)}, got {kind!r}'
    )
  key, files = source_key(data_dir)
  root = os.path.abspath(cache_dir or default_cache_dir())
  directory = os.path.join(root, key)
  cache = _from_index(directory, key)
  if cache is None:
    if os.path.exists(directory):
      shutil.rmtree(directory, ignore_errors=True)  # Damaged: convert again.
    cache = _convert(files, kind, key, directory)
  if kind != 'auto' and cache.kind != kind:
    raise leaf.LeafDataError(
        f'{os.path.abspath(data_dir)}: holds {cache.kind}-style data, not '
        f'{kind}'
    )
  for line in cache.warnings:
    logging.warning('%s: %s', os.path.abspath(data_dir), line)
  return cache
