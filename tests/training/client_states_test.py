"""Tests for tff_fedwin.training.client_states.ClientStateStore."""

import os
from typing import Any, NamedTuple

import numpy as np
import pytest

from tff_fedwin import training


class _State(NamedTuple):
  control_variate: Any
  extras: Any


def _template():
  """A nested template with several containers, shapes and dtypes."""
  return _State(
      control_variate=[
          np.zeros((3, 2), np.float32),
          np.zeros((2,), np.float32),
      ],
      extras={
          'count': np.zeros((), np.int64),
          'scale': (np.zeros((4,), np.float64),),
      },
  )


def _state(seed: int):
  rng = np.random.default_rng(seed)
  return _State(
      control_variate=[
          rng.normal(size=(3, 2)).astype(np.float32),
          rng.normal(size=(2,)).astype(np.float32),
      ],
      extras={
          'count': np.array(seed, np.int64),
          'scale': (rng.normal(size=(4,)),),
      },
  )


def _assert_states_identical(actual, expected):
  """Same nested containers, dtypes, shapes and values (bitwise)."""
  assert type(actual) is type(expected)
  assert type(actual.control_variate) is type(expected.control_variate)
  assert type(actual.extras['scale']) is type(expected.extras['scale'])
  assert sorted(actual.extras) == sorted(expected.extras)
  actual_leaves = [
      *actual.control_variate,
      actual.extras['count'],
      *actual.extras['scale'],
  ]
  expected_leaves = [
      *expected.control_variate,
      expected.extras['count'],
      *expected.extras['scale'],
  ]
  assert len(actual_leaves) == len(expected_leaves)
  for a, e in zip(actual_leaves, expected_leaves):
    assert isinstance(a, np.ndarray)
    assert a.dtype == e.dtype
    assert a.shape == e.shape
    np.testing.assert_array_equal(a, e)


def test_get_creates_zero_state_for_new_client():
  store = training.ClientStateStore(_template())
  assert len(store) == 0

  (state,) = store.get(['a'])

  _assert_states_identical(state, _template())
  assert 'a' in store
  assert store.client_ids == ('a',)


def test_get_returns_copies():
  store = training.ClientStateStore(_template())
  (state,) = store.get(['a'])

  state.control_variate[0][...] = 7.0

  _assert_states_identical(store.get(['a'])[0], _template())


def test_new_clients_do_not_share_arrays():
  store = training.ClientStateStore(_template())
  store.update(['a'], [_state(1)])

  _assert_states_identical(store.get(['b'])[0], _template())


def test_update_then_get_returns_new_states():
  store = training.ClientStateStore(_template())
  store.update(['a', 'b'], [_state(1), _state(2)])

  got = store.get(['b', 'a', 'b'])

  _assert_states_identical(got[0], _state(2))
  _assert_states_identical(got[1], _state(1))
  _assert_states_identical(got[2], _state(2))


def test_clients_not_updated_keep_their_state():
  store = training.ClientStateStore(_template())
  store.update(['a', 'b', 'c'], [_state(1), _state(2), _state(3)])

  store.update(['b'], [_state(4)])

  a, b, c = store.get(['a', 'b', 'c'])
  _assert_states_identical(a, _state(1))
  _assert_states_identical(b, _state(4))
  _assert_states_identical(c, _state(3))


def test_update_normalizes_containers_to_the_template():
  store = training.ClientStateStore(_template())
  expected = _state(1)
  # TFF returns lists where the template may hold tuples, and vice versa.
  as_other_containers = _State(
      control_variate=tuple(expected.control_variate),
      extras={
          'count': expected.extras['count'],
          'scale': list(expected.extras['scale']),
      },
  )

  store.update(['a'], [as_other_containers])

  _assert_states_identical(store.get(['a'])[0], expected)


def test_update_copies_the_given_arrays():
  store = training.ClientStateStore(_template())
  state = _state(1)
  store.update(['a'], [state])

  state.control_variate[0][...] = 7.0

  _assert_states_identical(store.get(['a'])[0], _state(1))


@pytest.mark.parametrize('num_clients', [0, 3])
def test_save_load_round_trip_is_exact(tmp_path, num_clients):
  store = training.ClientStateStore(_template())
  ids = [f'client/{i} ü' for i in range(num_clients)][::-1]
  store.update(ids, [_state(i) for i in range(num_clients)])
  path = str(tmp_path / 'states.npz')

  store.save(path)
  restored = training.ClientStateStore.load(path, _template())

  assert restored.client_ids == store.client_ids
  for client_id, expected in zip(ids, [_state(i) for i in range(num_clients)]):
    _assert_states_identical(restored.get([client_id])[0], expected)
  _assert_states_identical(restored.template, _template())


def test_save_overwrites_previous_file(tmp_path):
  path = str(tmp_path / 'states.npz')
  store = training.ClientStateStore(_template())
  store.update(['a'], [_state(1)])
  store.save(path)

  store.update(['a', 'b'], [_state(2), _state(3)])
  store.save(path)

  restored = training.ClientStateStore.load(path, _template())
  assert restored.client_ids == ('a', 'b')
  _assert_states_identical(restored.get(['a'])[0], _state(2))
  assert os.listdir(tmp_path) == ['states.npz']


def _fail_after_partial_write(file, **unused_arrays):
  file.write(b'PK partial zip')
  raise OSError('disk full')


def _fail(*unused_args, **unused_kwargs):
  raise OSError('simulated crash')


@pytest.mark.parametrize(
    'module, name, replacement',
    [
        (np, 'savez', _fail_after_partial_write),
        (os, 'fsync', _fail),
        (os, 'replace', _fail),
    ],
)
def test_failed_save_keeps_previous_file_and_leaves_no_temp_file(
    tmp_path, monkeypatch, module, name, replacement
):
  path = str(tmp_path / 'states.npz')
  store = training.ClientStateStore(_template())
  store.update(['a'], [_state(1)])
  store.save(path)
  with open(path, 'rb') as f:
    previous_bytes = f.read()
  store.update(['a', 'b'], [_state(2), _state(3)])
  monkeypatch.setattr(module, name, replacement)

  message = 'disk full' if name == 'savez' else 'simulated crash'
  with pytest.raises(OSError, match=f'^{message}$'):
    store.save(path)

  monkeypatch.undo()
  assert os.listdir(tmp_path) == ['states.npz']
  with open(path, 'rb') as f:
    assert f.read() == previous_bytes
  restored = training.ClientStateStore.load(path, _template())
  assert restored.client_ids == ('a',)
  _assert_states_identical(restored.get(['a'])[0], _state(1))


def _other_shape_template():
  template = _template()
  template.control_variate[1] = np.zeros((3,), np.float32)
  return template


def _other_dtype_template():
  template = _template()
  template.extras['count'] = np.zeros((), np.int32)
  return template


def _other_structure_template():
  template = _template()
  template.control_variate.append(np.zeros((1,), np.float32))
  return template


@pytest.mark.parametrize(
    'template_fn',
    [_other_shape_template, _other_dtype_template, _other_structure_template],
)
def test_load_rejects_mismatched_template(tmp_path, template_fn):
  path = str(tmp_path / 'states.npz')
  store = training.ClientStateStore(_template())
  store.update(['a'], [_state(1)])
  store.save(path)

  with pytest.raises(ValueError, match='`template`'):
    training.ClientStateStore.load(path, template_fn())


def test_load_rejects_foreign_file(tmp_path):
  path = str(tmp_path / 'other.npz')
  np.savez(path, x=np.zeros(3))

  with pytest.raises(ValueError, match='`path`'):
    training.ClientStateStore.load(path, _template())


def _wrong_structure_state():
  state = _state(1)
  state.control_variate.append(np.zeros((1,), np.float32))
  return state


def _wrong_shape_state():
  state = _state(1)
  state.control_variate[0] = np.zeros((2, 3), np.float32)
  return state


def _wrong_dtype_state():
  state = _state(1)
  state.control_variate[0] = np.zeros((3, 2), np.float64)
  return state


@pytest.mark.parametrize(
    'client_ids, states_fn, argument',
    [
        (['a', 'b'], lambda: [_state(1)], '`states`'),
        (['a'], lambda: [_state(1), _state(2)], '`states`'),
        (['a', 'a'], lambda: [_state(1), _state(2)], '`client_ids`'),
        ([1], lambda: [_state(1)], '`client_ids`'),
        ('a', lambda: [_state(1)], '`client_ids`'),
        (['a'], lambda: _state(1), '`states'),
        (['a'], lambda: [_wrong_structure_state()], r'`states\[0\]'),
        (['a'], lambda: [_wrong_shape_state()], r'`states\[0\]'),
        (['a'], lambda: [_wrong_dtype_state()], r'`states\[0\]'),
    ],
)
def test_update_rejects_bad_arguments(client_ids, states_fn, argument):
  store = training.ClientStateStore(_template())
  store.update(['a'], [_state(9)])

  with pytest.raises(ValueError, match=argument):
    store.update(client_ids, states_fn())


def test_failed_update_changes_nothing():
  store = training.ClientStateStore(_template())
  store.update(['a'], [_state(1)])

  with pytest.raises(
      ValueError,
      match=r"`states\[1\] \(client 'b'\)` leaf 0 has shape \(2, 3\)",
  ):
    store.update(['a', 'b'], [_state(2), _wrong_shape_state()])

  assert store.client_ids == ('a',)
  _assert_states_identical(store.get(['a'])[0], _state(1))


@pytest.mark.parametrize('client_ids', ['a', [b'a'], [None], 3])
def test_get_rejects_bad_client_ids(client_ids):
  store = training.ClientStateStore(_template())

  with pytest.raises(ValueError, match='`client_ids`'):
    store.get(client_ids)


@pytest.mark.parametrize('template', [[], {}, ()])
def test_rejects_template_without_arrays(template):
  with pytest.raises(ValueError, match='`template`'):
    training.ClientStateStore(template)
