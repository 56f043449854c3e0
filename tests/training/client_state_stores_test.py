"""The two client-state stores behind one protocol: same behaviour, same tests.

`open_client_states('memory' | 'disk', ...)` is what the loop uses; every test
here runs on both kinds. Expected values are written in the test.
"""

import collections

import numpy as np
import pytest

from tff_fedwin.training import client_state_stores

IDS = ['a', 'b', 'c', 'd']
KINDS = ['memory', 'disk']


def _template():
  return collections.OrderedDict(
      c=np.zeros([2, 3], np.float32), n=np.zeros([], np.int64)
  )


def _state(value):
  return collections.OrderedDict(
      c=np.full([2, 3], value, np.float32), n=np.int64(value)
  )


def _open(tmp_path, kind, round_num=None):
  return client_state_stores.open_client_states(
      kind,
      _template(),
      IDS,
      checkpoint_dir=str(tmp_path),
      round_num=round_num,
  )


def _checkpoint(store, round_num):
  store.prepare_checkpoint(round_num)
  store.finish_checkpoint(round_num, {round_num})


def _values(states):
  """(c[0, 0], n) per state; c is constant in these tests."""
  for state in states:
    assert np.all(state['c'] == state['c'][0, 0])
  return [(float(s['c'][0, 0]), int(s['n'])) for s in states]


@pytest.fixture(params=KINDS)
def kind(request):
  return request.param


@pytest.fixture
def store(kind, tmp_path):
  opened = _open(tmp_path, kind)
  yield opened
  opened.close()


def test_new_clients_get_the_template(store):
  states = store.get(['a', 'd'])

  assert _values(states) == [(0.0, 0), (0.0, 0)]
  assert states[0]['c'].dtype == np.float32 and states[0]['c'].shape == (2, 3)
  assert states[0]['n'].dtype == np.int64


def test_get_returns_the_last_update_in_the_order_asked(store):
  store.update(['b', 'a'], [_state(2), _state(1)])
  store.update(['b'], [_state(5)])

  assert _values(store.get(['a', 'b', 'c', 'b'])) == [
      (1.0, 1),
      (5.0, 5),
      (0.0, 0),
      (5.0, 5),
  ]


def test_returned_states_are_copies(store):
  store.update(['a'], [_state(1)])
  state = store.get(['a'])[0]
  state['c'][...] = 7.0

  assert _values(store.get(['a'])) == [(1.0, 1)]


@pytest.mark.parametrize(
    'ids, states, message',
    [
        (['a', 'a'], [_state(1), _state(2)], 'duplicate'),
        (['a'], [_state(1), _state(2)], 'same length'),
        (
            ['a', 'b'],
            [
                _state(1),
                collections.OrderedDict(c=np.zeros([2, 3], np.float32)),
            ],
            'template structure',
        ),
        (
            ['a', 'b'],
            [_state(1), dict(c=np.zeros([3, 2], np.float32), n=np.int64(0))],
            'shape',
        ),
    ],
)
def test_bad_update_raises_and_changes_nothing(store, ids, states, message):
  with pytest.raises(ValueError, match=message):
    store.update(ids, states)

  assert _values(store.get(['a', 'b'])) == [(0.0, 0), (0.0, 0)]


def test_restore_gives_the_states_of_the_checkpoint_not_later_updates(
    tmp_path, kind, store
):
  _checkpoint(store, 0)
  store.update(['a', 'b'], [_state(1), _state(2)])
  _checkpoint(store, 1)
  store.update(['b', 'c'], [_state(3), _state(4)])
  store.update(['a'], [_state(5)])
  _checkpoint(store, 2)
  # Updates after the newest checkpoint: lost in a crash.
  store.update(['d', 'a'], [_state(8), _state(9)])
  store.close()

  restored = _open(tmp_path, kind, round_num=2)

  assert _values(restored.get(IDS)) == [(5.0, 5), (3.0, 3), (4.0, 4), (0, 0)]
  restored.close()


@pytest.mark.parametrize(
    'num_clients, expected',
    [
        # State: 2*3*4 + 8 = 32 bytes. 2**30 / 32 = 33,554,432 clients fit.
        (2**30 // 32, 'memory'),
        (2**30 // 32 + 1, 'disk'),
    ],
)
def test_auto_picks_disk_above_a_gib_of_population_states(
    num_clients, expected
):
  assert (
      client_state_stores.choose_kind('auto', _template(), num_clients)
      == expected
  )


@pytest.mark.parametrize('kind', KINDS)
def test_explicit_kind_is_kept(kind):
  assert client_state_stores.choose_kind(kind, _template(), 10**9) == kind


def test_unknown_kind_names_the_argument_and_the_choices():
  with pytest.raises(ValueError, match=r'client_states.*auto.*memory.*disk'):
    client_state_stores.choose_kind('ram', _template(), 4)
