"""A LEAF directory converted once into per-client binary files, read by id.

`load_leaf_cache(data_dir, kind, cache_dir)` checks and converts the LEAF
JSON (`tff_fedwin.data.leaf`) on the first start, several files at once
(`leaf_convert`), into `<cache_dir>/<key>/`; later starts find it there and
parse nothing. What the key covers (`source_key`: every JSON file's name,
size and CRC-32, `leaf_convert.CONVERTER_VERSION`, the `options_record` of
the `leaf_kinds.LeafOptions`), how `<cache_dir>/stat_keys/` spares a later
start reading the files (`stat_key`), and why a killed conversion or an entry
of another user is never used (`leaf_cache_trust`): docs/data.md, "The first
start converts, later starts read" and "The cache is used only when it is
yours". Layout of a conversion:

* `train/<name>.x`, `train/<name>.y`: one training client's raw examples,
  `<name>` the client id in URL-safe base64 without padding (what
  `tf.io.encode_base64` writes, so the workers find the file from the id):
  the arrays `tff_fedwin.data.leaf` reads, little-endian, in the dtypes of
  `leaf_convert.LAYOUT`.
* `test.x`, `test.y`: the test split pooled, the same records, test files in
  name order and users in each file's order.
* `index.json`, written last: the key, the kind, the training client ids in
  sorted order, their example and class counts (as many as the classes),
  the test size, the rows' width, the test users and their example counts
  in `test.x`'s order, Sent140's and Reddit's vocabulary size and special
  ids, and the warnings of the read (`leaf_kinds.LeafNotes`), logged again
  by every load. An index without
  test users (written before they were recorded) is converted again.

A conversion is written in a temporary directory beside it and renamed into
place when complete; a cache whose index or file sizes do not match is
converted again. The workers read the files with TensorFlow ops
(`tff_fedwin.data.leaf_client_data`), so they must see `cache_dir` (local
workers, or a shared file system).
"""

import hashlib
import json
import os
import shutil
import tempfile
import zlib
from typing import Optional

from absl import logging
import attrs

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache_entry
from tff_fedwin.data import leaf_cache_trust as trust
from tff_fedwin.data import leaf_convert
from tff_fedwin.data import leaf_kinds

FORMAT = leaf_cache_entry.FORMAT
INDEX = leaf_cache_entry.INDEX
LeafCache = leaf_cache_entry.LeafCache
_from_index = leaf_cache_entry.from_index
# `<cache_dir>/stat_keys/<stat_key>`: the content key of those exact files.
STAT_KEYS = 'stat_keys'
_CRC_CHUNK = 4 * 2**20
# The cache's record sizes (`leaf_convert` writes them).
record_bytes = leaf_convert.record_bytes


def default_cache_dir() -> str:
  """`~/.cache/tff_fedwin/leaf`."""
  return os.path.join(os.path.expanduser('~'), '.cache', 'tff_fedwin', 'leaf')


def _crc32(path: str) -> int:
  crc = 0
  with open(path, 'rb') as f:
    while chunk := f.read(_CRC_CHUNK):
      crc = zlib.crc32(chunk, crc)
  return crc


def json_files(
    data_dir: str, eval_dir: Optional[str] = None
) -> dict[str, list[str]]:
  """`data_dir`'s JSON files per split, in name order; the `'test'` split
  from `eval_dir/` if given (LEAF's Reddit `val/`).

  Raises:
    LeafDataError: If `train/` or `test/` (`eval_dir/`) is missing or holds
      no `.json`.
  """
  return {
      'train': leaf.leaf_json_files(data_dir, 'train'),
      'test': leaf.leaf_json_files(data_dir, eval_dir or 'test'),
  }


def options_record(options: leaf_kinds.LeafOptions) -> list:
  """What of `options` a cache key covers (module docstring)."""
  record = []
  if options.images_dir:
    images = os.path.abspath(options.images_dir)
    try:
      listing = sorted(
          (e.name, e.stat().st_size, e.stat().st_mtime_ns)
          for e in os.scandir(images)
      )
    except OSError as e:
      raise leaf.LeafDataError(
          f'{images}: cannot list the images directory (--leaf_images_dir): '
          f'{e.strerror}'
      ) from None
    digest = hashlib.sha256(json.dumps(listing).encode()).hexdigest()
    record.append(['images_dir', images, digest])
  if options.vocab_file:
    try:
      record.append(['vocab_file', _crc32(options.vocab_file)])
    except OSError as e:
      raise leaf.LeafDataError(
          f'{options.vocab_file}: cannot read the vocabulary file '
          f'(--leaf_vocab_file): {e.strerror}'
      ) from None
  if options.vocab_size is not None:
    record.append(['vocab_size', options.vocab_size])
  if options.eval_dir:
    record.append(['eval_dir', options.eval_dir])
  return record


def stat_key(files: dict[str, list[str]], options: tuple = ()) -> str:
  """A digest of the files' paths, sizes, times (ns), inodes and devices.

  Any write to a file changes its ctime (which no `utime` sets back), and a
  replaced file has another inode, so a file changed in any way gives
  another digest: it names the `STAT_KEYS` entry that remembers the content
  key of these exact files without reading them.
  """
  records = [FORMAT, leaf_convert.CONVERTER_VERSION, *options]
  for split, paths in files.items():
    for path in paths:
      stat = os.stat(path)
      records.append(
          [split, os.path.abspath(path), stat.st_size, stat.st_mtime_ns]
          + [stat.st_ctime_ns, stat.st_ino, stat.st_dev]
      )
  return hashlib.sha256(json.dumps(records).encode()).hexdigest()[:32]


def source_key(
    data_dir: str, options: tuple = (), eval_dir: Optional[str] = None
) -> tuple[str, dict[str, list[str]]]:
  """The cache key of `data_dir` (its contents) and its JSON files.

  A digest of every file's split, name, size and CRC-32 (the files read
  once, streaming): not of its times, so a copied or touched file finds its
  conversion.

  `options`: `options_record`'s list; `eval_dir`: as for `json_files`.

  Raises:
    LeafDataError: If `train/` or `test/` is missing or holds no `.json`.
  """
  files = json_files(data_dir, eval_dir)
  records = [FORMAT, leaf_convert.CONVERTER_VERSION, *options]
  for split, paths in files.items():
    for path in paths:
      records.append(
          [split, os.path.basename(path), os.path.getsize(path), _crc32(path)]
      )
  digest = hashlib.sha256(json.dumps(records).encode()).hexdigest()
  return digest[:32], files


def _write_conversion(files, kind, key, out_dir, options) -> None:
  """Converts `files` into `out_dir`, its index written last."""
  converted = leaf_convert.convert_splits(files, kind, out_dir, options=options)
  ids = converted.client_ids
  order = sorted(range(len(ids)), key=ids.__getitem__)
  index = {
      'format': FORMAT,
      'key': key,
      'converter': leaf_convert.CONVERTER_VERSION,
      'kind': converted.kind,
      'client_ids': [ids[i] for i in order],
      'num_examples': [converted.num_examples[i] for i in order],
      'class_counts': [converted.class_counts[i] for i in order],
      'num_test_examples': converted.num_test_examples,
      'warnings': converted.notes.messages(),
      'x_width': converted.x_width,
      'test_users': [list(u) for u in converted.test_users],
      'vocab_size': converted.vocab_size,
      'pad_id': converted.pad_id,
      'unknown_id': converted.unknown_id,
  }
  with open(os.path.join(out_dir, INDEX), 'w') as f:
    json.dump(index, f)
    f.flush()
    os.fsync(f.fileno())


def _written(directory: str, key: str) -> LeafCache:
  """The conversion just written into `directory`."""
  cache = _from_index(directory, key)
  if cache is None:
    raise OSError(f'{directory}: the LEAF conversion just written is damaged')
  return attrs.evolve(cache, converted=True)


def _convert(files, kind, key, directory, options) -> LeafCache:
  """Converts into a temporary directory, then renames it to `directory`.

  If `directory` appeared meanwhile, another process's conversion of ours is
  used; anything else there (`trust.foreign`) is left, and the temporary
  directory stays this conversion (one warning).
  """
  root = os.path.dirname(directory)
  os.makedirs(root, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f'.{key}.tmp-', dir=root)
  try:
    _write_conversion(files, kind, key, tmp, options)
    try:
      os.rename(tmp, directory)
    except OSError:
      problem = trust.foreign(directory)
      if problem:
        logging.warning(
            '%s: not used; the conversion stays in %s', problem, tmp
        )
        directory = tmp
      else:  # Another process completed the same conversion first: use its.
        shutil.rmtree(tmp, ignore_errors=True)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return _written(directory, key)


def _convert_privately(files, kind, key, options, problem: str) -> LeafCache:
  """Converts into `trust.private_directory` (the cache is not ours)."""
  directory = trust.private_directory(key, problem)
  try:
    _write_conversion(files, kind, key, directory, options)
  except BaseException:
    shutil.rmtree(directory, ignore_errors=True)
    raise
  return _written(directory, key)


def _found_or_converted(root, data_dir, files, kind, record, options):
  """`load_leaf_cache`'s conversion: found under `root`, or made now."""
  stat_keys = os.path.join(root, STAT_KEYS)
  problem = trust.foreign(root) or trust.foreign(stat_keys)
  by_stat = os.path.join(stat_keys, stat_key(files, record))
  key = None if problem else trust.read_key(by_stat)
  cache = None
  if key is not None and not trust.foreign(os.path.join(root, key)):
    cache = _from_index(os.path.join(root, key), key)
  if cache is None:
    key, files = source_key(data_dir, record, options.eval_dir)
    directory = os.path.join(root, key)
    problem = problem or trust.foreign(directory)
    if problem:
      return _convert_privately(files, kind, key, options, problem)
    cache = _from_index(directory, key)
    if cache is None:
      if os.path.lexists(directory):  # Damaged: convert again.
        shutil.rmtree(directory, ignore_errors=True)
      cache = _convert(files, kind, key, directory, options)
  trust.write_key(by_stat, key)
  return cache


def load_leaf_cache(
    data_dir: str,
    kind: str = 'auto',
    cache_dir: Optional[str] = None,
    options: leaf_kinds.LeafOptions = leaf_kinds.LeafOptions(),
) -> LeafCache:
  """The conversion of `data_dir`: found in `cache_dir`, or made now.

  Checks the whole directory on conversion (no TensorFlow work). A start
  whose JSON files have the paths, sizes, times and inodes of a start before
  (`stat_key`) reads only the index and the files' sizes; otherwise the
  files' CRC-32s give the content key (`source_key`), so files copied or
  touched without a change still find their conversion.

  Args:
    data_dir: A LEAF directory with `train/*.json` and `test/*.json`.
    kind: 'auto' (recognized from the data), or one of `leaf.KINDS`.
    cache_dir: Where conversions live; None for `default_cache_dir()`.
    options: CelebA's images directory, Sent140's vocabulary
      (`leaf_kinds.LeafOptions`).

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
  root = os.path.abspath(cache_dir or default_cache_dir())
  files = json_files(data_dir, options.eval_dir)
  cache = _found_or_converted(
      root, data_dir, files, kind, options_record(options), options
  )
  if kind != 'auto' and cache.kind != kind:
    raise leaf.LeafDataError(
        f'{os.path.abspath(data_dir)}: holds {cache.kind}-style data, not '
        f'{kind}'
    )
  for line in cache.warnings:
    logging.warning('%s: %s', os.path.abspath(data_dir), line)
  return cache
