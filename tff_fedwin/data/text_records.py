"""Per-client text records from a JSONL or CSV file, split into train and test.

The input of the text task (`tff_fedwin.tasks.text`; the format and the split
rule for a user: docs/data.md, "Text, StackOverflow-style"). One record per
example, the format chosen by the file's extension: `.jsonl`, one JSON object
per line, lines ending at `\\n` only (JSON Lines: U+2028, U+2029 and U+0085
are part of their line, a `\\r` before the `\\n` is JSON whitespace, blank
lines are skipped); `.csv`, a header row naming the columns, then one row per
record (Python's `csv` dialect `excel`, fields of any length). Both are UTF-8
(a leading byte-order mark is ignored) and read streamed, a line at a time.

Fields: `client_id` (a non-empty string), `text` (a string) and, optionally,
`split` (`train` or `test`: on every record or on none; in CSV an empty cell
is an unknown value); others are ignored. Without `split`, the last
`floor(test_fraction * n)` of each client's `n` records, in file order, are
its test records (`num_test_records`: the floor of the decimal value as
written); as `test_fraction < 1`, a client always keeps a training record.

Every problem is a `TextDataError` (a `ValueError`) on one line naming the
file, the line (1-based, a record's first line) or client, and the problem,
raised before any TensorFlow work.
"""

import collections
import csv
import fractions
import json
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import attrs

from tff_fedwin import checks
from tff_fedwin import errors
from tff_fedwin.data import json_limits

SPLITS = ('train', 'test')
FIELDS = ('client_id', 'text')
SPLIT_FIELD = 'split'
EXTENSIONS = ('.jsonl', '.csv')


class TextDataError(errors.InputError):
  """A text data file cannot be used; the message names file, line, problem."""


@attrs.frozen
class TextRecord:
  """One example of a text file.

  Attributes:
    client_id: The client's id.
    text: The example's text.
    split: `'train'`, `'test'`, or None if the file has no `split` field.
    line: The 1-based line of the file where the record starts.
  """

  client_id: str
  text: str
  split: Optional[str]
  line: int


@attrs.frozen
class TextSplits:
  """A text file's records, split per client.

  Attributes:
    client_ids: The clients, sorted (every one has training texts).
    train: client id -> its training texts, in file order.
    test: The test texts of all clients pooled, in file order.
    test_clients: The client of each of `test`'s texts.
  """

  client_ids: tuple[str, ...]
  train: dict[str, tuple[str, ...]]
  test: tuple[str, ...]
  test_clients: tuple[str, ...]


def _error(path: str, line: Optional[int], problem: str) -> TextDataError:
  where = f'{path}, line {line}' if line is not None else path
  return TextDataError(f'{where}: {problem}')


def _lines(path: str) -> Iterator[tuple[int, str]]:
  """(1-based number, text) of each line, split on `\\n` only, streamed.

  JSON Lines' lines (and the lines `_csv_records` names in its errors).

  Each line is decoded as UTF-8 (a leading byte-order mark dropped) as it is
  read, so a line's number is right whatever it holds (U+2028, U+0085, form
  feeds and lone carriage returns are characters of a line, not ends).

  Raises:
    TextDataError: If the file cannot be read or a line is not UTF-8.
  """
  try:
    f = open(path, 'rb')
  except OSError as e:
    raise _error(path, None, f'cannot read the file ({e.strerror}).') from e
  with f:
    for number, raw in enumerate(f, start=1):
      try:
        yield number, raw.decode('utf-8-sig' if number == 1 else 'utf-8')
      except UnicodeDecodeError as e:
        raise _error(path, number, 'not UTF-8 text.') from e


def _check_fields(path: str, line: int, fields: dict[str, Any]) -> None:
  for name in FIELDS:
    if name not in fields:
      raise _error(path, line, f'missing field "{name}".')
    value = fields[name]
    if not isinstance(value, str):
      raise _error(
          path,
          line,
          f'field "{name}" must be a string, got {type(value).__name__} '
          f'{value!r}.',
      )
  if not fields['client_id']:
    raise _error(path, line, 'field "client_id" is empty.')
  if SPLIT_FIELD in fields and fields[SPLIT_FIELD] not in SPLITS:
    raise _error(
        path,
        line,
        f'field "split" must be one of {SPLITS}, got '
        f'{fields[SPLIT_FIELD]!r}.',
    )


def _record(path: str, line: int, fields: dict[str, Any]) -> TextRecord:
  _check_fields(path, line, fields)
  return TextRecord(
      fields['client_id'], fields['text'], fields.get(SPLIT_FIELD), line
  )


# JSON's whitespace (RFC 8259 sec. 2): a line of only these is blank.
_JSON_WHITESPACE = ' \t\n\r'


def _jsonl_records(path: str) -> list[TextRecord]:
  records = []
  for number, line in _lines(path):
    if not line.strip(_JSON_WHITESPACE):
      continue
    try:
      fields = json.loads(line)
    except json.JSONDecodeError as e:
      raise _error(path, number, f'invalid JSON ({e.msg}).') from e
    except json_limits.LIMIT_ERRORS as e:  # Deep nesting, a huge integer.
      raise _error(path, number, json_limits.problem(e) + '.') from None
    if not isinstance(fields, dict):
      raise _error(
          path,
          number,
          f'expected a JSON object, got {type(fields).__name__}.',
      )
    records.append(_record(path, number, fields))
  return records


def _csv_header(path: str, header: Sequence[str]) -> None:
  missing = [name for name in FIELDS if name not in header]
  duplicated = sorted({h for h in header if header.count(h) > 1})
  if missing or duplicated:
    problem = (
        f'missing column(s) {missing}'
        if missing
        else f'duplicated column(s) {duplicated}'
    )
    raise _error(
        path,
        1,
        f'bad CSV header {list(header)}: {problem}; it must name the columns '
        f'"client_id" and "text" (and optionally "split").',
    )


# A CSV field may be as long as a text (csv's default limit is 128 KiB).
_CSV_FIELD_LIMIT = 2**31 - 1


def _csv_records(path: str) -> list[TextRecord]:
  """The records of a CSV file, read streamed as Python's `csv` reads files.

  Opened with `newline=''` (the `csv` module's way: its reader finds the
  line ends, also inside quoted fields); a line that is not UTF-8 is named
  by a second, binary pass (`_lines`).
  """
  try:
    f = open(path, encoding='utf-8-sig', newline='')
  except OSError as e:
    raise _error(path, None, f'cannot read the file ({e.strerror}).') from e
  old_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
  try:
    with f:
      return _csv_rows(path, csv.reader(f))
  except UnicodeDecodeError:
    for _ in _lines(path):  # Raises TextDataError naming the line.
      pass
    raise
  finally:
    csv.field_size_limit(old_limit)


def _csv_rows(path: str, reader: Any) -> list[TextRecord]:
  try:
    header = next(reader, None)
    if header is None:
      return []
    _csv_header(path, header)
    records, start = [], reader.line_num + 1
    for row in reader:
      if not row:  # A blank line.
        start = reader.line_num + 1
        continue
      if len(row) != len(header):
        raise _error(
            path,
            start,
            f"expected {len(header)} fields (the header's), got {len(row)}.",
        )
      records.append(_record(path, start, dict(zip(header, row))))
      start = reader.line_num + 1
  except csv.Error as e:
    raise _error(path, reader.line_num, f'bad CSV ({e}).') from e
  return records


def _check_split_presence(path: str, records: Sequence[TextRecord]) -> None:
  """Raises TextDataError unless all records have `split` or none has."""
  has_split = records[0].split is not None
  for record in records:
    if (record.split is not None) != has_split:
      first = 'has' if has_split else 'has no'
      this = 'has no' if has_split else 'has'
      raise _error(
          path,
          record.line,
          f'this record {this} "split" field but the first record (line '
          f'{records[0].line}) {first}: either every record has "split" or '
          'none has.',
      )


def read_text_records(path: str) -> list[TextRecord]:
  """The records of a `.jsonl` or `.csv` text file (module docstring).

  Args:
    path: The file; its extension (`EXTENSIONS`) chooses the format.

  Returns:
    The records in file order.

  Raises:
    TextDataError: If the extension is not one of `EXTENSIONS`, the file
      cannot be read or is not UTF-8, holds no record, a line is not valid
      JSON or not an object, the CSV header lacks `client_id` or `text`, a
      CSV row has another number of fields than the header, a field is
      missing or not a string, `client_id` is empty, `split` is not one of
      `SPLITS`, or some records have `split` and others not.
  """
  extension = os.path.splitext(path)[1].lower()
  if extension not in EXTENSIONS:
    raise _error(
        path, None, f'unknown extension {extension!r}; use one of {EXTENSIONS}.'
    )
  if extension == '.jsonl':
    records = _jsonl_records(path)
  else:
    records = _csv_records(path)
  if not records:
    raise _error(path, None, 'empty file: no records.')
  _check_split_presence(path, records)
  return records


def num_test_records(num_records: int, test_fraction: float) -> int:
  """`floor(test_fraction * num_records)`, on the decimal `test_fraction`.

  `fractions.Fraction(repr(test_fraction))` is the decimal as written
  (0.29 -> 29/100), so e.g. `num_test_records(100, 0.29) == 29` although the
  float product is 28.999999999999996.
  """
  return math.floor(fractions.Fraction(repr(test_fraction)) * num_records)


def load_text_splits(path: str, test_fraction: float = 0.2) -> TextSplits:
  """The records of `path` (`read_text_records`), split per client.

  With a `split` field, by the field; without, the last
  `num_test_records(n, test_fraction)` of each client's `n` records.

  Args:
    path: The `.jsonl` or `.csv` file.
    test_fraction: In `[0, 1)`; used only if the records have no `split`.
      Checked first, before the file is read.

  Returns:
    The `TextSplits`.

  Raises:
    TextDataError: If `test_fraction` is not a number in `[0, 1)` (named as
      the argument), as `read_text_records`, if a client has no training
      record (its first line is named), or if no record is a test record.
  """
  test_fraction = _checked_test_fraction(test_fraction)
  records = read_text_records(path)
  by_client = collections.defaultdict(list)
  for record in records:
    by_client[record.client_id].append(record)
  test_records = set()
  for client_records in by_client.values():
    if client_records[0].split is None:
      n = len(client_records)
      num_train = n - num_test_records(n, test_fraction)
      test_records.update(r.line for r in client_records[num_train:])
    else:
      test_records.update(r.line for r in client_records if r.split == 'test')
  for client_id, client_records in by_client.items():
    if all(r.line in test_records for r in client_records):
      raise _error(
          path,
          client_records[0].line,
          f'client {client_id!r} has no training examples (all its '
          f'{len(client_records)} records are split "test").',
      )
  if not test_records:
    raise _error(
        path,
        None,
        'no test examples: give some records "split": "test", or a '
        f'test_fraction large enough (got {test_fraction}).',
    )
  train = {
      c: tuple(r.text for r in rs if r.line not in test_records)
      for c, rs in sorted(by_client.items())
  }
  test_records = [r for r in records if r.line in test_records]
  return TextSplits(
      tuple(train),
      train,
      tuple(r.text for r in test_records),
      tuple(r.client_id for r in test_records),
  )


def _checked_test_fraction(test_fraction: Any) -> float:
  """`test_fraction` as a float in [0, 1), or TextDataError naming it."""
  try:
    value = checks.check_number('test_fraction', test_fraction)
  except ValueError:  # Not a real number (or NaN): refused below.
    value = math.nan
  if not 0.0 <= value < 1.0:
    raise TextDataError(
        f'`test_fraction` must be a number in [0, 1), got {test_fraction!r}.'
    )
  return value
