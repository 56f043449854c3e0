"""Tests for tff_fedwin.data.text_vocab: tokens, vocabulary and ids by hand."""

import numpy as np
import pytest

from tff_fedwin.data import text_vocab

# Counts: a 3, the 2, cat 2, sat 2, dog 1, down 1. Ranked by count, ties by
# first occurrence: a, the, cat, sat, dog, down (alphabetical order would put
# cat before the).
_TEXTS = ('the cat sat', 'the dog sat  down', 'a cat a\ta')


def _vocab(vocab_size=4):
  return text_vocab.build_vocabulary(_TEXTS, vocab_size=vocab_size)


@pytest.mark.parametrize(
    'text, tokens',
    [
        # Lowercased; ',' and '.' tokens of their own.
        ("Hi,  you're late.\tOK\n", ['hi', ',', "you're", 'late', '.', 'ok']),
        # Inner apostrophes (ASCII and U+2019) stay; a leading one does not.
        (
            "We know't; \u2019tis don\u2019t",
            ['we', "know't", ';', '\u2019', 'tis', 'don\u2019t'],
        ),
        # Every non-word, non-space character alone, also in a run of them.
        (
            'e.g. 3.5 -- a_b',
            ['e', '.', 'g', '.', '3', '.', '5', '-', '-', 'a_b'],
        ),
        ('   ', []),
    ],
)
def test_tokenize_words_lowercases_and_cuts_off_punctuation(text, tokens):
  assert text_vocab.tokenize(text) == tokens
  assert text_vocab.tokenize(text, 'word', 'words') == tokens


def test_tokenize_whitespace_is_a_plain_split():
  assert text_vocab.tokenize('Hi,  you.\tOK\n', tokenizer='whitespace') == [
      'Hi,',
      'you.',
      'OK',
  ]
  assert text_vocab.tokenize('   ', tokenizer='whitespace') == []


def test_vocabulary_keeps_its_tokenizer():
  # 'The' and 'the.' are one word to `words` (the 2, '.' 1), two to
  # `whitespace`, which keeps both as written.
  texts = ['The cat', 'the.']
  words = text_vocab.build_vocabulary(texts, vocab_size=10)
  assert words.tokens == ('the', 'cat', '.') and words.tokenizer == 'words'
  x, _ = text_vocab.text_to_sequences('THE.', words, 3)
  np.testing.assert_array_equal(x, [[words.bos_id, 1, 3]])
  split = text_vocab.build_vocabulary(
      texts, vocab_size=10, tokenizer='whitespace'
  )
  assert split.tokens == ('The', 'cat', 'the.')
  x, _ = text_vocab.text_to_sequences('THE.', split, 3)
  np.testing.assert_array_equal(x, [[split.bos_id, split.oov_id, split.eos_id]])


@pytest.mark.parametrize('tokenizer', text_vocab.TOKENIZERS)
def test_tokenize_char_keeps_every_code_point(tokenizer):
  assert text_vocab.tokenize('A b\né', 'char', tokenizer) == [
      'A',
      ' ',
      'b',
      '\n',
      'é',
  ]


def test_vocabulary_order_ties_and_cut():
  assert _vocab(4).tokens == ('a', 'the', 'cat', 'sat')
  assert _vocab(100).tokens == ('a', 'the', 'cat', 'sat', 'dog', 'down')


def test_special_ids_follow_tff_layout():
  vocab = _vocab(4)  # V = 4: pad 0, words 1..4, oov 5, bos 6, eos 7.
  assert (text_vocab.PAD_ID, vocab.oov_id, vocab.bos_id, vocab.eos_id) == (
      0,
      5,
      6,
      7,
  )
  assert vocab.num_ids == 8
  assert vocab.ids(['a', 'the', 'cat', 'sat', 'dog', 'zebra']) == [
      1,
      2,
      3,
      4,
      5,
      5,
  ]


@pytest.mark.parametrize(
    'text, length, x, y',
    [
        # 3 tokens, not fewer than L = 3: no EOS (TFF's to_ids).
        ('the cat sat', 3, [[6, 2, 3]], [[2, 3, 4]]),
        # Cut to 3 tokens (dog -> oov 5), no EOS.
        ('the dog sat down', 3, [[6, 2, 5]], [[2, 5, 4]]),
        # 2 tokens < 3: EOS appended.
        ('a cat', 3, [[6, 1, 3]], [[1, 3, 7]]),
        # Padded to L + 1 = 6 with 0, then shifted.
        ('a cat', 5, [[6, 1, 3, 7, 0]], [[1, 3, 7, 0, 0]]),
        ('', 3, [[6, 7, 0]], [[7, 0, 0]]),
    ],
)
def test_word_sequences_by_hand(text, length, x, y):
  got_x, got_y = text_vocab.text_to_sequences(text, _vocab(4), length)
  assert got_x.dtype == np.int32 and got_y.dtype == np.int32
  np.testing.assert_array_equal(got_x, x)
  np.testing.assert_array_equal(got_y, y)


def test_texts_to_arrays_concatenates_in_order():
  x, y = text_vocab.texts_to_arrays(['a cat', 'the cat sat'], _vocab(4), 3)
  np.testing.assert_array_equal(x, [[6, 1, 3], [6, 2, 3]])
  np.testing.assert_array_equal(y, [[1, 3, 7], [2, 3, 4]])
  x, y = text_vocab.texts_to_arrays([], _vocab(4), 3)
  assert x.shape == (0, 3) and y.shape == (0, 3)


def test_char_vocabulary_and_chunks():
  # Characters a, b, ' ', a, b: a 2, b 2, ' ' 1 -> a=1, b=2, ' '=3, oov 4,
  # bos 5, eos 6.
  vocab = text_vocab.build_vocabulary(
      ['ab a', 'b'], vocab_size=10, level='char'
  )
  assert vocab.tokens == ('a', 'b', ' ')
  assert (vocab.oov_id, vocab.bos_id, vocab.eos_id, vocab.num_ids) == (
      4,
      5,
      6,
      7,
  )
  # Stream [5, 1, 2, 3, 1, 6]: chunks of L + 1 = 3, no padding needed.
  x, y = text_vocab.text_to_sequences('ab a', vocab, 2)
  np.testing.assert_array_equal(x, [[5, 1], [3, 1]])
  np.testing.assert_array_equal(y, [[1, 2], [1, 6]])
  # Chunks of 4: [5, 1, 2, 3], [1, 6, 0, 0].
  x, y = text_vocab.text_to_sequences('ab a', vocab, 3)
  np.testing.assert_array_equal(x, [[5, 1, 2], [1, 6, 0]])
  np.testing.assert_array_equal(y, [[1, 2, 3], [6, 0, 0]])
  # 'c' is not a training character: oov 4.
  x, y = text_vocab.text_to_sequences('c', vocab, 3)
  np.testing.assert_array_equal(x, [[5, 4, 6]])
  np.testing.assert_array_equal(y, [[4, 6, 0]])


def test_char_vocabulary_cut_by_vocab_size():
  vocab = text_vocab.build_vocabulary(['ab a', 'b'], vocab_size=2, level='char')
  assert vocab.tokens == ('a', 'b') and vocab.ids(' ') == [3]


@pytest.mark.parametrize(
    'kwargs, match',
    [
        (dict(vocab_size=0), r'`vocab_size` must be an integer >= 1'),
        (dict(vocab_size=3, level='byte'), r"`level` must be one of .*'byte'"),
        (
            dict(vocab_size=3, tokenizer='nltk'),
            r"`tokenizer` must be one of \('words', 'whitespace'\), got 'nltk'",
        ),
    ],
)
def test_bad_arguments(kwargs, match):
  with pytest.raises(ValueError, match=match):
    text_vocab.build_vocabulary(_TEXTS, **kwargs)


def test_no_tokens_refused():
  with pytest.raises(ValueError, match='training texts have no word token'):
    text_vocab.build_vocabulary(['', '  '], vocab_size=3)


def test_bad_sequence_length():
  with pytest.raises(ValueError, match='`sequence_length` must be an integer'):
    text_vocab.text_to_sequences('a', _vocab(), 0)
