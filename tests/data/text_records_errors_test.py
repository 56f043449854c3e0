"""Tests for tff_fedwin.data.text_records: files and arguments it refuses.

Each case writes a file and gives a regex the one-line `TextDataError` must
match: the file's name, the line where there is one, and the problem.
"""

import re

import pytest

from tff_fedwin.data import text_records

_OK = '{"client_id": "a", "text": "x y"}\n{"client_id": "a", "text": "z"}\n'

_BAD_FILES = [
    pytest.param('.jsonl', b'', r': empty file: no records', id='empty_jsonl'),
    pytest.param('.jsonl', b'\n  \n', r': empty file', id='blank_jsonl'),
    pytest.param('.csv', b'', r': empty file', id='empty_csv'),
    pytest.param(
        '.csv', b'client_id,text\n', r': empty file', id='header_only'
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x"}\n{"client_id": "a", "text": \n',
        r', line 2: invalid JSON',
        id='invalid_json',
    ),
    pytest.param(
        '.jsonl', b'["a", "x"]\n', r', line 1: expected a JSON object, got list'
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x"}\n\n{"client_id": "a"}\n',
        r', line 3: missing field "text"',
        id='missing_text',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": 7, "text": "x"}\n',
        r', line 1: field "client_id" must be a string, got int 7',
        id='int_client_id',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": null}\n',
        r', line 1: field "text" must be a string, got NoneType',
        id='null_text',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "", "text": "x"}\n',
        r', line 1: field "client_id" is empty',
        id='empty_client_id',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x", "split": "valid"}\n',
        r', line 1: field "split" must be one of .*got \'valid\'',
        id='unknown_split',
    ),
    pytest.param(
        '.csv',
        b'client_id,text,split\na,x,train\na,y,\n',
        r', line 3: field "split" must be one of .*got \'\'',
        id='empty_split_cell',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x", "split": "train"}\n'
        b'{"client_id": "a", "text": "y"}\n',
        r', line 2: this record has no "split" field but the first record '
        r'\(line 1\) has',
        id='split_mix',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x", "split": "train"}\n'
        b'{"client_id": "b", "text": "y", "split": "test"}\n'
        b'{"client_id": "a", "text": "z", "split": "test"}\n',
        r", line 2: client 'b' has no training examples",
        id='client_without_train',
    ),
    pytest.param(
        '.csv',
        b'user,text\na,x\n',
        r', line 1: bad CSV header \[\'user\', \'text\'\]: missing column\(s\) '
        r"\['client_id'\]",
        id='csv_header_missing',
    ),
    pytest.param(
        '.csv',
        b'client_id,text,text\na,x,y\n',
        r", line 1: bad CSV header .*duplicated column\(s\) \['text'\]",
        id='csv_header_duplicate',
    ),
    pytest.param(
        '.csv',
        b'client_id,text\na,x\na,y,z\n',
        r", line 3: expected 2 fields \(the header's\), got 3",
        id='csv_row_length',
    ),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x"}\n'
        b'{"client_id": "a", "text": "\xff"}\n',
        r', line 2: not UTF-8 text',
        id='not_utf8',
    ),
    pytest.param(
        '.csv',
        b'client_id,text\na,"x\ny"\nb,\xff\n',
        r', line 4: not UTF-8 text',
        id='csv_not_utf8',
    ),
    pytest.param('.txt', _OK.encode(), r": unknown extension '.txt'", id='ext'),
    pytest.param(
        '.jsonl',
        b'{"client_id": "a", "text": "x"}\n{"client_id": "b", "text": "y"}\n',
        r': no test examples',
        id='no_test_examples',
    ),
]


@pytest.mark.parametrize('extension, content, problem', _BAD_FILES)
def test_bad_file(tmp_path, extension, content, problem):
  path = tmp_path / f'bad{extension}'
  path.write_bytes(content)
  with pytest.raises(
      text_records.TextDataError, match=re.escape(str(path)) + problem
  ) as error:
    text_records.load_text_splits(str(path), test_fraction=0.4)
  assert '\n' not in str(error.value)


def test_missing_file(tmp_path):
  path = str(tmp_path / 'none.jsonl')
  with pytest.raises(
      text_records.TextDataError,
      match=re.escape(path) + r': cannot read the file \(No such file',
  ):
    text_records.load_text_splits(path)


@pytest.mark.parametrize(
    'test_fraction', [1.0, -0.1, float('nan'), '0.2', True]
)
def test_bad_test_fraction(tmp_path, test_fraction):
  path = tmp_path / 'ok.jsonl'
  path.write_text(_OK)
  with pytest.raises(
      text_records.TextDataError,
      match=r'`test_fraction` must be a number in \[0, 1\), got ',
  ):
    text_records.load_text_splits(str(path), test_fraction)


def test_bad_test_fraction_checked_before_the_file_is_read(tmp_path):
  with pytest.raises(text_records.TextDataError, match='`test_fraction`'):
    text_records.load_text_splits(str(tmp_path / 'none.jsonl'), 1.5)


def test_error_is_a_value_error():
  assert issubclass(text_records.TextDataError, ValueError)
