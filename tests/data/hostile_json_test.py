"""JSON nested 100,000 deep or holding a 5,000-digit integer: one line.

Python's parser raises `RecursionError` on the first and a `ValueError`
naming no file on the second (`tff_fedwin.data.json_limits`); every reader
of user JSON (LEAF's files, Sent140's `embs.json`, JSON Lines) reports
either as its one-line error naming the file (and the line), which the
scripts print as one line (`errors.InputError`). The limits are not raised.
"""

import os
import re
import sys

import pytest

from tests.data import leaf_fixtures as fx
from tff_fedwin import errors
from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import leaf_sent140
from tff_fedwin.data import text_records

_DEEP = '[' * 100_000 + ']' * 100_000
_HUGE = '7' * 5_000
_PROBLEMS = {
    'deep': r'invalid JSON: nested too deeply \(.*recursion limit',
    'huge': r'invalid JSON: an integer of more than 4300 digits',
}


def _one_line(error: BaseException, where: str, kind: str) -> None:
  message = str(error)
  assert isinstance(error, errors.InputError), type(error)
  assert '\n' not in message
  assert message.startswith(where), message
  assert re.search(_PROBLEMS[kind], message), message


@pytest.mark.parametrize('kind', ['deep', 'huge'])
def test_leaf_file(tmp_path, kind):
  root = fx.write_leaf_dir(
      tmp_path / 'leaf', {}, {'t.json': {'u9': ([fx.LINE_A], ['a'])}}
  )
  path = os.path.join(root, 'train', 'a.json')
  value = _DEEP if kind == 'deep' else _HUGE
  with open(path, 'w') as f:
    f.write(
        '{"users": ["u1"], "num_samples": [1], "user_data": {"u1": '
        f'{{"x": [{value}], "y": [1]}}}}}}'
    )
  limit = sys.getrecursionlimit()
  with pytest.raises(leaf.LeafDataError) as raised:
    leaf_cache.load_leaf_cache(root, cache_dir=str(tmp_path / 'cache'))
  _one_line(raised.value, f'{path}: ', kind)
  assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize('kind', ['deep', 'huge'])
def test_sent140_vocabulary_file(tmp_path, kind):
  path = tmp_path / 'embs.json'
  path.write_text(
      '{"vocab": ' + (_DEEP if kind == 'deep' else f'["a", {_HUGE}]') + '}'
  )
  with pytest.raises(leaf_kinds.LeafDataError) as raised:
    leaf_sent140.read_vocab_file(str(path))
  _one_line(raised.value, f'{path}: ', kind)


@pytest.mark.parametrize('kind', ['deep', 'huge'])
def test_jsonl_line(tmp_path, kind):
  path = tmp_path / 'texts.jsonl'
  value = _DEEP if kind == 'deep' else _HUGE
  path.write_text(
      '{"client_id": "a", "text": "x y"}\n'
      f'{{"client_id": "a", "text": "z", "n": {value}}}\n'
  )
  with pytest.raises(text_records.TextDataError) as raised:
    text_records.load_text_splits(str(path))
  _one_line(raised.value, f'{path}, line 2: ', kind)
