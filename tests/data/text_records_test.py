"""Tests for tff_fedwin.data.text_records: JSONL and CSV, splits by hand."""

import csv
import json
import os

import pytest

from tff_fedwin.data import text_records

_SAMPLES = os.path.join(
    os.path.dirname(text_records.__file__), 'samples', 'text_sample'
)

# (client_id, text): a comma, a quote and a non-ASCII character for CSV.
_ROWS = [
    ('a', 'one, two'),
    ('b', 'say "hi"'),
    ('a', 'three'),
    ('c', 'café'),
    ('a', 'four'),
    ('c', 'five'),
    ('a', 'six'),
    ('a', 'seven'),
    ('c', 'eight'),
]


def _write(tmp_path, rows, extension, split=None):
  """Writes `rows` (plus a `split` per row if given) as JSONL or CSV."""
  path = str(tmp_path / f'records{extension}')
  with open(path, 'w', newline='', encoding='utf-8') as f:
    if extension == '.jsonl':
      for i, (client_id, text) in enumerate(rows):
        fields = dict(client_id=client_id, text=text)
        if split:
          fields['split'] = split[i]
        f.write(json.dumps(fields, ensure_ascii=False) + '\n')
    else:
      writer = csv.writer(f, lineterminator='\n')
      writer.writerow(['client_id', 'text'] + (['split'] if split else []))
      for i, row in enumerate(rows):
        writer.writerow(list(row) + ([split[i]] if split else []))
  return path


def test_jsonl_and_csv_give_the_same_records(tmp_path):
  jsonl = text_records.read_text_records(_write(tmp_path, _ROWS, '.jsonl'))
  csv_records = text_records.read_text_records(_write(tmp_path, _ROWS, '.csv'))
  assert [(r.client_id, r.text, r.split) for r in jsonl] == [
      (c, t, None) for c, t in _ROWS
  ]
  assert [(r.client_id, r.text, r.split) for r in csv_records] == [
      (c, t, None) for c, t in _ROWS
  ]
  # JSONL lines 1..9; CSV's header is line 1, its records lines 2..10.
  assert [r.line for r in jsonl] == list(range(1, 10))
  assert [r.line for r in csv_records] == list(range(2, 11))


def test_csv_multiline_field_line_is_the_records_first(tmp_path):
  path = tmp_path / 'multi.csv'
  path.write_text('client_id,text\na,"x\ny"\nb,z\n', encoding='utf-8')
  records = text_records.read_text_records(str(path))
  assert [(r.text, r.line) for r in records] == [('x\ny', 2), ('z', 4)]


def test_jsonl_lines_end_at_newline_only(tmp_path):
  # JSON allows U+2028, U+2029 and U+0085 raw inside strings; str.splitlines
  # would end a line at each. Line 2 holds all three raw, line 3 an escaped
  # form feed and a CRLF end; line 4 is a blank line of JSON whitespace.
  path = tmp_path / 'odd.jsonl'
  path.write_bytes(
      b'{"client_id": "a", "text": "one"}\n'
      + '{"client_id": "a", "text": "x\u2028y\u2029z\u0085w"}\n'.encode()
      + b'{"client_id": "b", "text": "p\\fq"}\r\n'
      + b' \t\r\n'
      + b'{"client_id": "b", "text": "last"}\n'
  )
  records = text_records.read_text_records(str(path))
  assert [(r.client_id, r.text, r.line) for r in records] == [
      ('a', 'one', 1),
      ('a', 'x\u2028y\u2029z\u0085w', 2),
      ('b', 'p\fq', 3),
      ('b', 'last', 5),
  ]


def test_jsonl_error_after_odd_characters_names_its_line(tmp_path):
  path = tmp_path / 'bad.jsonl'
  path.write_bytes(
      '{"client_id": "a", "text": "x\u2028\u2028y"}\n{"client_id": 1}\n'.encode()
  )
  with pytest.raises(
      text_records.TextDataError,
      match=r'bad\.jsonl, line 2: field "client_id" must be a string',
  ):
    text_records.read_text_records(str(path))


def test_csv_field_longer_than_csvs_default_limit(tmp_path):
  # csv's default field_size_limit is 131072 characters; this text is 2x.
  text = 'word ' * 52429  # 262145 characters.
  path = tmp_path / 'long.csv'
  path.write_text(f'client_id,text\na,"{text}"\nb,short\n', encoding='utf-8')
  limit = csv.field_size_limit()
  records = text_records.read_text_records(str(path))
  assert [(r.client_id, len(r.text), r.line) for r in records] == [
      ('a', 262145, 2),
      ('b', 5, 3),
  ]
  assert csv.field_size_limit() == limit  # Restored: a global of csv.


@pytest.mark.parametrize('extension', ['.jsonl', '.csv'])
def test_split_by_fraction_by_hand(tmp_path, extension):
  path = _write(tmp_path, _ROWS, extension)
  splits = text_records.load_text_splits(path, test_fraction=0.4)
  # a: 5 records, floor(0.4 * 5) = 2 test (the last two: six, seven).
  # b: 1 record, floor(0.4) = 0: kept in train.
  # c: 3 records, floor(1.2) = 1 test (eight).
  assert splits.client_ids == ('a', 'b', 'c')
  assert splits.train == {
      'a': ('one, two', 'three', 'four'),
      'b': ('say "hi"',),
      'c': ('café', 'five'),
  }
  assert splits.test == ('six', 'seven', 'eight')  # File order.
  assert splits.test_clients == ('a', 'a', 'c')


@pytest.mark.parametrize('extension', ['.jsonl', '.csv'])
def test_split_by_field(tmp_path, extension):
  split = ['train', 'train', 'test', 'train', 'train', 'test', 'test', 'train']
  split.append('train')
  path = _write(tmp_path, _ROWS, extension, split=split)
  # test_fraction is not used with a split field.
  splits = text_records.load_text_splits(path, test_fraction=0.0)
  assert splits.train == {
      'a': ('one, two', 'four', 'seven'),
      'b': ('say "hi"',),
      'c': ('café', 'eight'),
  }
  assert splits.test == ('three', 'five', 'six')


@pytest.mark.parametrize(
    'num_records, test_fraction, expected',
    [
        (100, 0.29, 29),  # The float product is 28.999999999999996.
        (5, 0.2, 1),
        (3, 0.5, 1),  # floor(1.5)
        (1, 0.99, 0),  # One record stays in train.
        (10, 0.0, 0),
    ],
)
def test_num_test_records(num_records, test_fraction, expected):
  assert text_records.num_test_records(num_records, test_fraction) == expected


def test_samples_jsonl_and_csv_agree():
  jsonl = text_records.load_text_splits(_SAMPLES + '.jsonl')
  csv_splits = text_records.load_text_splits(_SAMPLES + '.csv')
  assert jsonl == csv_splits
  assert len(jsonl.client_ids) == 5
  # 30 records per client: floor(0.2 * 30) = 6 test each.
  assert {len(t) for t in jsonl.train.values()} == {24}
  assert len(jsonl.test) == 30
