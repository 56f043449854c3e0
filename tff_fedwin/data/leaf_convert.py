"""A LEAF directory's JSON files converted into the cache's binary files.

`convert_splits` checks and converts every file of both splits
(`tff_fedwin.data.leaf`) into a conversion directory
(`tff_fedwin.data.leaf_cache`'s layout): each training user's `train/<name>.x`
and `.y`, the test split pooled into `test.x`, `test.y`. The files are
independent, so they are converted by up to `MAX_WORKERS` processes at once,
one file each at a time; the results are merged in the files' name order, so
the users, the test split's order, the warnings and the first error are
those of one process reading the files in order.

The processes are forked, and only while TensorFlow is not imported (the
scripts check their data files before importing it): forking a process that
runs TensorFlow's threads can deadlock the child, and spawning re-imports the
caller's `__main__` (a script without a main guard would run again). With
TensorFlow imported, and for directories below `PARALLEL_MIN_BYTES` (where a
process costs more than it saves), this process converts the files itself.
"""

import base64
import concurrent.futures
import multiprocessing
import os
import shutil
import sys
from typing import Any, Optional

import attrs
import numpy as np

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_celeba
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import leaf_reddit
from tff_fedwin.data import leaf_sent140

# What this converter writes, in every cache key (`leaf_cache`): raised with
# any change to what it writes, so that no older conversion is served.
CONVERTER_VERSION = 1
# Per kind: (x row width, x dtype, y dtype, number of classes); None: the
# directory's (Synthetic: the rows' width, 1 + the largest label; Reddit:
# no label counts, its classes are its vocabulary).
LAYOUT = {
    'femnist': (leaf.FEMNIST_PIXELS, '<f4', '<i4', leaf.FEMNIST_CLASSES),
    'shakespeare': (
        leaf.SHAKESPEARE_SEQ_LENGTH,
        'u1',
        'u1',
        leaf.SHAKESPEARE_VOCAB_SIZE,
    ),
    'synthetic': (None, '<f4', '<i4', None),
    'sent140': (
        leaf_sent140.SEQ_LENGTH,
        '<i4',
        '<i4',
        leaf_sent140.NUM_CLASSES,
    ),
    'celeba': (leaf_celeba.PIXELS, 'u1', '<i4', leaf_celeba.NUM_CLASSES),
    'reddit': (leaf_reddit.SEQ_LENGTH, '<i4', '<i4', None),
}
# The kinds whose y is a sequence as long as x (one label elsewhere).
SEQUENCE_LABELS = ('reddit',)
# The kinds read with a vocabulary (`leaf_kinds.Vocabulary`).
VOCABULARY_KINDS = ('sent140', 'reddit')
_NAME_MAX = 200
# JSON bytes from which the files are converted by several processes.
PARALLEL_MIN_BYTES = 64 * 2**20
# At most this many conversion processes (each holds one parsed file).
MAX_WORKERS = 4
_TEST_PARTS = 'test_parts'


def client_file_name(client_id: str) -> str:
  """URL-safe base64 of the id's UTF-8, no padding (`tf.io.encode_base64`)."""
  return (
      base64.urlsafe_b64encode(client_id.encode('utf-8')).decode().rstrip('=')
  )


def record_bytes(kind: str, x_width: int) -> tuple[int, int]:
  """Bytes of one example's x (`x_width` values) and y in the cache's files."""
  _, x_dtype, y_dtype, _ = LAYOUT[kind]
  y_width = x_width if kind in SEQUENCE_LABELS else 1
  return (
      x_width * np.dtype(x_dtype).itemsize,
      y_width * np.dtype(y_dtype).itemsize,
  )


@attrs.frozen
class _FileResult:
  """One converted file: its kind (None: no users) and users, its notes."""

  path: str
  kind: Optional[str]
  users: tuple[tuple[str, int, Optional[list[int]]], ...]  # id, n, classes.
  notes: leaf_kinds.LeafNotes
  x_width: int = 0  # Every row's values (0: no users).
  max_label: int = -1
  # Sent140 or Reddit data met without a vocabulary: nothing converted.
  needs_vocabulary: bool = False


@attrs.frozen
class Converted:
  """Both splits converted (see the module docstring).

  Attributes:
    kind: The directory's kind.
    client_ids: The training users, in the files' order.
    num_examples: Their example counts.
    class_counts: Their label counts (lists as long as the classes: the
      kind's, or Synthetic's 1 + the largest label of both splits; empty
      for Reddit, whose labels are token sequences over its vocabulary).
    num_test_examples: Examples of the pooled test split.
    notes: What the read accepted as LEAF's reader does.
    x_width: The values of every x row.
    test_users: The test split's users and their example counts, in the
      pooled test split's order (each user's examples contiguous).
    vocab_size: Sent140, Reddit: the ids of its vocabulary
      (`leaf_kinds.Vocabulary.size`; 0 for the other kinds).
    pad_id: Reddit: the padding's id (-1 for the other kinds).
    unknown_id: Sent140, Reddit: the unknown token's id (-1 for the others).
  """

  kind: str
  client_ids: list[str]
  num_examples: list[int]
  class_counts: list[list[int]]
  num_test_examples: int
  notes: leaf_kinds.LeafNotes
  x_width: int
  test_users: list[tuple[str, int]]
  vocab_size: int = 0
  pad_id: int = -1
  unknown_id: int = -1


def _convert_file(
    path: str,
    requested: str,
    out_dir: str,
    train: bool,
    part: int,
    inputs: leaf_kinds.ReadInputs,
) -> _FileResult:
  """Converts one file: training users' files, or a test part file."""
  notes = leaf_kinds.LeafNotes()
  found, users = leaf.iter_leaf_file(path, requested, notes, inputs)
  if found is None:
    return _FileResult(path, None, (), notes)
  if found in VOCABULARY_KINDS and inputs.vocabulary is None:
    return _FileResult(path, found, (), notes, needs_vocabulary=True)
  _, x_dtype, y_dtype, num_classes = LAYOUT[found]
  written = []
  width, width_user, max_label = 0, None, -1
  parts = None
  if not train:
    base = os.path.join(out_dir, _TEST_PARTS, str(part))
    parts = (open(base + '.x', 'wb'), open(base + '.y', 'wb'))
  try:
    for user, x, y in users:
      if width_user is None:
        width, width_user = x.shape[1], user
      elif x.shape[1] != width:
        raise leaf.LeafDataError(
            f'{path}: user {user!r}: x rows have {x.shape[1]} values but user '
            f'{width_user!r} has rows of {width}; a LEAF directory has one width'
        )
      max_label = max(max_label, int(y.max()))
      x, y = x.astype(x_dtype, copy=False), y.astype(y_dtype, copy=False)
      if train:
        name = client_file_name(user)
        if len(name) > _NAME_MAX:
          raise leaf.LeafDataError(
              f'{path}: user {user[:40]!r}...: the id is too long for a file '
              'name (at most 150 bytes of UTF-8)'
          )
        x.tofile(os.path.join(out_dir, 'train', name + '.x'))
        y.tofile(os.path.join(out_dir, 'train', name + '.y'))
        classes = (
            []  # A sequence of tokens: no label counts (module docstring).
            if found in SEQUENCE_LABELS
            else np.bincount(y, minlength=num_classes or 0).tolist()
        )
        written.append((user, len(y), classes))
      else:
        x.tofile(parts[0])
        y.tofile(parts[1])
        written.append((user, len(y), None))
  finally:
    for f in parts or ():
      f.close()
  return _FileResult(path, found, tuple(written), notes, width, max_label)


class _Merge:
  """The files' results, merged in their order (module docstring)."""

  def __init__(self):
    self.kind: Optional[str] = None
    self.first_path: Optional[str] = None
    # Per split (LEAF's by-sample split has every user in both): user ->
    # the file it is in.
    self.seen: dict[bool, dict[str, str]] = {True: {}, False: {}}
    self.notes = leaf_kinds.LeafNotes()
    self.train: list[tuple[str, int, list[int]]] = []
    self.test: list[tuple[str, int]] = []
    self.test_examples = 0
    self.x_width = 0
    self.max_label = -1
    self.needs_vocabulary = False

  def add(self, result: _FileResult, train: bool) -> None:
    if result.needs_vocabulary:
      self.needs_vocabulary, self.kind = True, result.kind
      return
    notes = result.notes
    self.notes.num_samples_users += notes.num_samples_users
    self.notes.empty_files.extend(notes.empty_files)
    self.notes.unknown_x += notes.unknown_x
    self.notes.unknown_y += notes.unknown_y
    if result.kind is None:
      return
    if self.kind is None:
      self.kind, self.first_path = result.kind, result.path
      self.x_width = result.x_width
    elif result.kind != self.kind:
      raise leaf.LeafDataError(
          f'{result.path}: holds {result.kind}-style data but '
          f'{self.first_path} holds {self.kind}-style data; a LEAF directory '
          'holds one kind'
      )
    elif result.x_width != self.x_width:
      raise leaf.LeafDataError(
          f'{result.path}: x rows have {result.x_width} values but '
          f'{self.first_path} has rows of {self.x_width}; a LEAF directory '
          'has one width'
      )
    self.max_label = max(self.max_label, result.max_label)
    seen = self.seen[train]
    for user, n, classes in result.users:
      if user in seen:
        raise leaf.LeafDataError(
            f'{result.path}: user {user!r}: appears in {seen[user]} too'
        )
      seen[user] = result.path
      if train:
        self.train.append((user, n, classes))
      else:
        self.test.append((user, n))
        self.test_examples += n


def _no_users(paths: list[str]) -> leaf.LeafDataError:
  return leaf.LeafDataError(
      f'{os.path.dirname(paths[0])}: no user in any .json file (each has '
      '"users": []); a LEAF split needs at least one user'
  )


def pool_context() -> Optional[Any]:
  """The processes' start method: fork before TensorFlow is imported."""
  if 'tensorflow' in sys.modules:
    return None
  return multiprocessing.get_context('fork')


def _workers(files: dict[str, list[str]], max_workers: Optional[int]) -> int:
  """How many processes convert: 1 below `PARALLEL_MIN_BYTES` of JSON."""
  paths = files['train'] + files['test']
  if max_workers is None:
    if sum(os.path.getsize(p) for p in paths) < PARALLEL_MIN_BYTES:
      return 1
    max_workers = min(MAX_WORKERS, len(os.sched_getaffinity(0)))
  return max(1, min(max_workers, len(paths)))


def convert_splits(
    files: dict[str, list[str]],
    kind: str,
    out_dir: str,
    max_workers: Optional[int] = None,
    options: leaf_kinds.LeafOptions = leaf_kinds.LeafOptions(),
) -> Converted:
  """Converts `files` (split -> JSON paths) into `out_dir`.

  Args:
    files: `{'train': [...], 'test': [...]}`, each in name order.
    kind: 'auto', or the kind every file must hold.
    out_dir: An empty directory (the conversion's temporary one).
    max_workers: Processes converting at once; None: up to `MAX_WORKERS`
      (the CPUs this process may use) from `PARALLEL_MIN_BYTES` of JSON,
      else 1 (this process). Without a `pool_context()`, 1.
    options: What CelebA, Sent140 and Reddit need
      (`leaf_kinds.LeafOptions`). A Sent140 or Reddit vocabulary is read or
      built (`leaf_sent140.vocabulary`, `leaf_reddit`) before the files are
      converted: at once for `kind='sent140'` or `'reddit'`, else when the
      first file turns out to hold one of them (that file is read again).

  Returns:
    The merged `Converted`.

  Raises:
    LeafDataError: The first problem in the files' order (one line naming
      the file, the user and the problem).
  """
  vocabulary = None
  if kind in VOCABULARY_KINDS:
    vocabulary = _vocabulary(files, options, kind)
  inputs = leaf_kinds.ReadInputs(options.images_dir, vocabulary)
  merge = _convert_all(files, kind, out_dir, max_workers, inputs)
  if merge.needs_vocabulary:
    for name in ('train', _TEST_PARTS):
      shutil.rmtree(os.path.join(out_dir, name))
    vocabulary = _vocabulary(files, options, merge.kind)
    inputs = leaf_kinds.ReadInputs(options.images_dir, vocabulary)
    merge = _convert_all(files, kind, out_dir, max_workers, inputs)
  _join_test_parts(out_dir, len(files['test']))
  num_classes = LAYOUT[merge.kind][3] or (
      0 if merge.kind in SEQUENCE_LABELS else merge.max_label + 1
  )
  return Converted(
      merge.kind,
      [u for u, _, _ in merge.train],
      [n for _, n, _ in merge.train],
      [c + [0] * (num_classes - len(c)) for _, _, c in merge.train],
      merge.test_examples,
      merge.notes,
      merge.x_width,
      merge.test,
      *(
          (vocabulary.size, vocabulary.pad_id, vocabulary.unknown_id)
          if merge.kind in VOCABULARY_KINDS
          else ()
      ),
  )


def _vocabulary(files, options, kind) -> leaf_kinds.Vocabulary:
  """Sent140's or Reddit's: `options.vocab_file`'s, or built from the
  training files (read here once more)."""
  parsed = (leaf.load_json(path) for path in files['train'])
  if kind == 'sent140':
    return leaf_sent140.vocabulary(parsed, options)
  if options.vocab_file:
    return leaf_reddit.read_vocab_pickle(options.vocab_file)
  return leaf_reddit.build_vocab(parsed, options.vocab_size)


def _convert_all(files, kind, out_dir, max_workers, inputs) -> _Merge:
  """Converts every file into `out_dir` (train/ and the test parts)."""
  os.mkdir(os.path.join(out_dir, 'train'))
  os.mkdir(os.path.join(out_dir, _TEST_PARTS))
  tasks = [
      (path, kind, out_dir, split == 'train', i, inputs)
      for split in ('train', 'test')
      for i, path in enumerate(files[split])
  ]
  merge = _Merge()
  workers = _workers(files, max_workers)
  context = pool_context() if workers > 1 else None
  if context is None:
    results = (_convert_file(*task) for task in tasks)
    _merge_all(merge, tasks, results, files)
  else:
    with concurrent.futures.ProcessPoolExecutor(workers, context) as pool:
      futures = [pool.submit(_convert_file, *task) for task in tasks]
      try:
        _merge_all(merge, tasks, (f.result() for f in futures), files)
      finally:
        for future in futures:
          future.cancel()
  return merge


def _merge_all(merge: _Merge, tasks, results, files) -> None:
  """Merges the results in order; a split without users once it is read."""
  users = {'train': 0, 'test': 0}
  for (_, _, _, train, part, _), result in zip(tasks, results):
    split = 'train' if train else 'test'
    merge.add(result, train)
    if merge.needs_vocabulary:
      return
    users[split] += len(result.users)
    if part == len(files[split]) - 1 and not users[split]:
      raise _no_users(files[split])


def _join_test_parts(out_dir: str, num_parts: int) -> None:
  """`test.x`, `test.y`: the test files' parts in order; the parts removed."""
  parts_dir = os.path.join(out_dir, _TEST_PARTS)
  for suffix in ('.x', '.y'):
    with open(os.path.join(out_dir, 'test' + suffix), 'wb') as out:
      for part in range(num_parts):
        path = os.path.join(parts_dir, f'{part}{suffix}')
        if os.path.exists(path):
          with open(path, 'rb') as f:
            shutil.copyfileobj(f, out, 16 * 2**20)
  shutil.rmtree(parts_dir)
