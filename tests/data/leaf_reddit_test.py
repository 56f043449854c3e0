"""Tests for tff_fedwin.data.leaf_reddit: LEAF's Reddit sequences and vocabulary.

The directory is LEAF's own output (`tests/data/leaf_generated/make.sh`: its
Reddit `source/preprocess.py` on made-up comments, then `build_vocab.py
--vocab-size 30`, whose pickle is `vocab/reddit_vocab.pck`).
"""

import os
import pickle

import numpy as np
import pytest

from tff_fedwin.data import leaf
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import leaf_reddit
from tests.data import leaf_fixtures

SAMPLE = os.path.join(leaf_fixtures.GENERATED_DIR, 'reddit_sample')
PICKLE = os.path.join(SAMPLE, 'vocab', 'reddit_vocab.pck')


def _pickled():
  with open(PICKLE, 'rb') as f:  # LEAF's own file: trusted here.
    return pickle.load(f)


def _expected(record, vocab):
  """A user's (inputs, targets): every comment's sequences in order, each
  token its pickle id (`<UNK>`'s if absent), targets padding where
  count_tokens is 0."""
  ids, unk, pad = vocab['vocab'], vocab['unk_symbol'], vocab['pad_symbol']
  inputs, targets = [], []
  for comment, label in zip(record['x'], record['y']):
    for seq, target, counts in zip(
        comment, label['target_tokens'], label['count_tokens']
    ):
      inputs.append([ids.get(t, unk) for t in seq])
      targets.append(
          [ids.get(t, unk) if c else pad for t, c in zip(target, counts)]
      )
  return inputs, targets


def _rows(cache, user):
  return tuple(
      np.fromfile(p, '<i4').reshape(-1, 10).tolist()
      for p in cache.client_files(user)
  )


def test_sequences_with_leafs_pickle(tmp_path):
  options = leaf_kinds.LeafOptions(vocab_file=PICKLE)
  cache = leaf_cache.load_leaf_cache(
      SAMPLE, cache_dir=str(tmp_path), options=options
  )
  vocab = _pickled()
  assert (cache.kind, cache.vocab_size, cache.pad_id, cache.unknown_id) == (
      'reddit',
      30,
      0,
      1,
  )
  train = leaf_fixtures.generated_json('reddit_sample', 'train')
  for user in train['users']:
    assert _rows(cache, user) == _expected(train['user_data'][user], vocab)
  # The test split is test/; its users' sequences counted.
  test = leaf_fixtures.generated_json('reddit_sample', 'test')
  assert cache.test_users == tuple(
      (u, sum(len(c) for c in test['user_data'][u]['x'])) for u in test['users']
  )


def test_vocabulary_built_as_leafs_build_vocab(tmp_path):
  # LEAF's build_vocab.py --vocab-size 30 wrote the fixture's pickle.
  built = leaf_reddit.build_vocab(
      [leaf_fixtures.generated_json('reddit_sample', 'train')], 30
  )
  vocab = _pickled()
  assert (built.word_ids, built.size, built.unknown_id, built.pad_id) == (
      vocab['vocab'],
      30,
      1,
      0,
  )
  options = leaf_kinds.LeafOptions(vocab_size=30, eval_dir='val')
  cache = leaf_cache.load_leaf_cache(
      SAMPLE, cache_dir=str(tmp_path), options=options
  )
  train = leaf_fixtures.generated_json('reddit_sample', 'train')
  assert _rows(cache, '1') == _expected(train['user_data']['1'], vocab)
  # eval_dir='val': LEAF's val/ is the evaluation split.
  val = leaf_fixtures.generated_json('reddit_sample', 'val')
  assert cache.test_users == tuple(
      (u, sum(len(c) for c in val['user_data'][u]['x'])) for u in val['users']
  )


class _Runs:
  """Unpickling it would call os.mkdir(path)."""

  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return (os.mkdir, (self.path,))


@pytest.mark.parametrize(
    'content, match',
    [
        (
            'object',
            r'not a LEAF Reddit vocabulary pickle: it names posix\.mkdir',
        ),
        ({'vocab': {'a': 0}}, r'a LEAF Reddit vocabulary is \{"vocab"'),
        (
            {'vocab': {'a': 40}, 'size': 30, 'unk_symbol': 1, 'pad_symbol': 0},
            r'with integer ids in \[0, size\)',
        ),
    ],
)
def test_bad_vocabulary_pickle_is_one_line(tmp_path, content, match):
  ran = tmp_path / 'ran'
  path = tmp_path / 'vocab.pck'
  with open(path, 'wb') as f:
    pickle.dump(_Runs(str(ran)) if content == 'object' else content, f)
  with pytest.raises(leaf.LeafDataError, match=match) as raised:
    leaf_fixtures.load_generated(SAMPLE, tmp_path / 'c', vocab_file=str(path))
  assert '\n' not in str(raised.value)
  assert not ran.exists()  # Refused before anything it names ran.


def _one_comment(tmp_path, x, label):
  root = tmp_path / 'leaf'
  leaf_fixtures.write_leaf_dir(
      str(root),
      {'a.json': {'u1': ([x], [label])}},
      {'a.json': {'u1': ([x], [label])}},
  )
  return str(root)


_SEQ = ['<BOS>', 'hi', 'there', '<EOS>'] + ['<PAD>'] * 6
_TARGET = ['hi', 'there', '<EOS>'] + ['<PAD>'] * 7
_COUNTS = [1.0] * 4 + [0.0] * 6


@pytest.mark.parametrize(
    'x, label, match',
    [
        (
            [_SEQ[:4]],
            {'target_tokens': [_TARGET[:4]], 'count_tokens': [_COUNTS[:4]]},
            r'comment 0, sequence 0: x, target_tokens and count_tokens hold 10',
        ),
        (
            [_SEQ],
            {'target_tokens': [_TARGET], 'count_tokens': [[1.0] * 10]},
            r'comment 0, sequence 0: count_tokens is not 1 exactly where x is '
            r'not <PAD>',
        ),
        (
            [_SEQ],
            {'target_tokens': [_TARGET]},
            r"comment 0: x is not a list of sequences with y's target_tokens",
        ),
    ],
)
def test_bad_reddit_row_is_one_line(tmp_path, x, label, match):
  with pytest.raises(leaf.LeafDataError, match=r"a\.json: user 'u1': " + match):
    leaf_cache.load_leaf_cache(
        _one_comment(tmp_path, x, label), cache_dir=str(tmp_path / 'c')
    )


def test_targets_where_count_is_zero_are_padding(tmp_path):
  # LEAF's weights (count_tokens) decide what is scored, not the target
  # token: a word target at a count-0 position is padding (id 0) here.
  target = _TARGET[:4] + ['hi'] * 6  # Words where the counts are 0.
  root = _one_comment(
      tmp_path, [_SEQ], {'target_tokens': [target], 'count_tokens': [_COUNTS]}
  )
  cache = leaf_cache.load_leaf_cache(root, cache_dir=str(tmp_path / 'c'))
  # Built vocabulary (build_vocab.py's rule): <PAD> (6 of the 10 inputs) is
  # skipped at rank 0; <BOS>, <EOS>, hi, there by count then token: 2-5.
  _, y = _rows(cache, 'u1')
  assert y == [[4, 5, 3, 0] + [0] * 6]
