"""Tests for tff_fedwin.data.preloaded: one `load` serves one `take`."""

import pytest

from tff_fedwin.data import preloaded


class _Counting:
  """A loader that counts its calls and returns a new list each time."""

  def __init__(self):
    self.calls = []

  def __call__(self, path, option=0):
    self.calls.append((path, option))
    return [path, option]


def test_take_hands_over_the_loaded_result_without_a_second_read():
  loader = _Counting()
  loaded = preloaded.load(loader, 'a.npz', option=1)
  taken = preloaded.take(loader, 'a.npz', option=1)
  assert taken is loaded
  assert loader.calls == [('a.npz', 1)]


def test_take_without_load_or_with_other_arguments_reads():
  loader = _Counting()
  assert preloaded.take(loader, 'a.npz') == ['a.npz', 0]
  preloaded.load(loader, 'a.npz', option=1)
  assert preloaded.take(loader, 'a.npz', option=2) == ['a.npz', 2]
  assert preloaded.take(loader, 'b.npz', option=1) == ['b.npz', 1]
  assert loader.calls == [
      ('a.npz', 0),
      ('a.npz', 1),
      ('a.npz', 2),
      ('b.npz', 1),
  ]


def test_a_load_serves_one_take_only():
  loader = _Counting()
  first = preloaded.load(loader, 'a.npz')
  assert preloaded.take(loader, 'a.npz') is first
  second = preloaded.take(loader, 'a.npz')
  assert second is not first and second == first
  assert loader.calls == [('a.npz', 0), ('a.npz', 0)]


def test_a_failed_load_keeps_nothing():
  calls = []

  def failing(path):
    calls.append(path)
    if len(calls) == 1:
      raise ValueError(f'{path}: damaged')
    return path

  with pytest.raises(ValueError, match=r'^a\.npz: damaged$'):
    preloaded.load(failing, 'a.npz')
  assert preloaded.take(failing, 'a.npz') == 'a.npz'
  assert calls == ['a.npz', 'a.npz']
