"""Tests for tff_fedwin.data.leaf_sent140: LEAF's tweets as its model maps them.

The directory is LEAF's own output (`tests/data/leaf_generated/make.sh`: its
`data_to_json.sh` and `preprocess.sh -t sample` on made-up tweets). The
expected ids are derived here from LEAF's `line_to_indices`
(`models/utils/language_utils.py`): the words of the regular expression
`[\\w']+|[.,!?;]`, the first 25, each its vocabulary id, the unknown id
`len(vocabulary)` for other words and for the padding.
"""

import collections
import json
import os
import re

import numpy as np
import pytest

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import leaf_sent140
from tests.data import leaf_fixtures

SAMPLE = os.path.join(leaf_fixtures.GENERATED_DIR, 'sent140_sample')


def _json(split):
  return leaf_fixtures.generated_json('sent140_sample', split)


def _ids(text, vocab):
  words = re.findall(r"[\w']+|[.,!?;]", text)[:25]
  unknown = len(vocab)
  return [vocab.get(w, unknown) for w in words] + [unknown] * (25 - len(words))


def _rows(cache, user):
  x_path, y_path = cache.client_files(user)
  return np.fromfile(x_path, '<i4').reshape(-1, 25), np.fromfile(y_path, '<i4')


def test_tweets_written_by_leafs_scripts(tmp_path):
  cache = leaf_cache.load_leaf_cache(SAMPLE, cache_dir=str(tmp_path))
  train = _json('train')
  # The vocabulary: every training word (fewer than 10,000), by count, then
  # by the word.
  counts = collections.Counter(
      w
      for record in train['user_data'].values()
      for row in record['x']
      for w in re.findall(r"[\w']+|[.,!?;]", row[4])
  )
  order = sorted(counts, key=lambda w: (-counts[w], w))
  vocab = {w: i for i, w in enumerate(order)}
  # Its ids: the words', then the unknown word's (also the padding).
  assert (cache.kind, cache.vocab_size) == ('sent140', len(vocab) + 1)
  assert cache.unknown_id == len(vocab)
  assert cache.client_ids == tuple(sorted(train['users']))
  for user in train['users']:
    x, y = _rows(cache, user)
    record = train['user_data'][user]
    assert x.tolist() == [_ids(row[4], vocab) for row in record['x']]
    assert y.tolist() == record['y']
  # One row by hand: cat's first tweet, '; love http://t.co/x1', is the
  # words ; love http t . co x1 (':' and '/' are no words), then 18 x pad.
  x, _ = _rows(cache, 'cat')
  assert train['user_data']['cat']['x'][0][4] == '; love http://t.co/x1'
  words = [';', 'love', 'http', 't', '.', 'co', 'x1']
  assert x[0].tolist() == [vocab[w] for w in words] + [len(vocab)] * 18
  # Tweets of more than 25 words keep their first 25.
  assert any(
      len(re.findall(r"[\w']+|[.,!?;]", row[4])) > 25
      for r in train['user_data'].values()
      for row in r['x']
  )
  test = _json('test')
  assert cache.test_users == tuple(
      (u, len(test['user_data'][u]['y'])) for u in test['users']
  )


@pytest.mark.parametrize('form', ['embs_json', 'glove_txt', 'word_list'])
def test_vocab_file_gives_the_ids(tmp_path, form):
  # LEAF's embs.json ({"vocab": [...], "emba": [...]}), GloVe's .txt (a word
  # and its numbers per line), a plain word list: ids in the file's order.
  words = ['love', ';', 'x1', 'I']
  path = tmp_path / 'vocab'
  if form == 'embs_json':
    path.write_text(json.dumps({'vocab': words, 'emba': [[0.0]] * 5}))
  elif form == 'glove_txt':
    path.write_text(''.join(f'{w} 0.1 -0.2\n' for w in words))
  else:
    path.write_text('\n'.join(words) + '\n')
  options = leaf_kinds.LeafOptions(vocab_file=str(path))
  cache = leaf_cache.load_leaf_cache(
      SAMPLE, cache_dir=str(tmp_path / 'c'), options=options
  )
  assert cache.vocab_size == 5
  x, _ = _rows(cache, 'cat')
  # ; love http t . co x1 -> 1 0 4 4 4 4 2 (4: unknown), then 18 x 4.
  assert x[0].tolist() == [1, 0, 4, 4, 4, 4, 2] + [4] * 18


def test_vocab_size_keeps_the_most_frequent_words(tmp_path):
  options = leaf_kinds.LeafOptions(vocab_size=3)
  cache = leaf_cache.load_leaf_cache(
      SAMPLE, cache_dir=str(tmp_path), options=options
  )
  counts = collections.Counter(
      w
      for r in _json('train')['user_data'].values()
      for row in r['x']
      for w in re.findall(r"[\w']+|[.,!?;]", row[4])
  )
  top = sorted(counts, key=lambda w: (-counts[w], w))[:3]
  x, _ = _rows(cache, 'cat')
  text = _json('train')['user_data']['cat']['x'][0][4]
  assert cache.vocab_size == 4
  assert x[0].tolist() == _ids(text, {w: i for i, w in enumerate(top)})
  # Another vocabulary is another conversion, not the cached one.
  other = leaf_cache.load_leaf_cache(SAMPLE, cache_dir=str(tmp_path))
  assert other.directory != cache.directory and other.vocab_size > 4


@pytest.mark.parametrize(
    'text, match',
    [
        ('{"emba": []}', r'vocab: a JSON vocabulary is LEAF\'s embs\.json'),
        ('a 1\nb 2\na 3\n', r"vocab: word 'a' is at 0 and at 2"),
        ('\n\n', r'vocab: the vocabulary holds no word'),
    ],
)
def test_bad_vocab_file_is_one_line(tmp_path, text, match):
  path = tmp_path / 'vocab'
  path.write_text(text)
  with pytest.raises(leaf.LeafDataError, match=match) as raised:
    leaf_fixtures.load_generated(SAMPLE, tmp_path / 'c', vocab_file=str(path))
  assert '\n' not in str(raised.value)


def test_encode_is_leafs_line_to_indices():
  # LEAF keeps case and splits off . , ! ? ; only; 25 ids at most.
  vocab = leaf_sent140.from_words({"It's": 0, '!': 1, 'ok': 2})
  ids = leaf_sent140.encode(["It's ok!! it's OK:)", 'ok ' * 30], vocab)
  assert ids.tolist() == [
      [0, 2, 1, 1, 3, 3]
      + [3] * 19,  # it's, OK unknown (case); ':' ')' no words.
      [2] * 25,
  ]
