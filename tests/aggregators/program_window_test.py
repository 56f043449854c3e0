"""`ProgramWindow` and its round files, against numpy means of the models."""

import os

import numpy as np
import pytest

from tff_fedwin import aggregators
from tff_fedwin.aggregators import round_model_files


def _models(count, seed=0):
  """w^1 .. w^count: a float32 matrix and a float16 vector (two dtypes)."""
  rng = np.random.default_rng(seed)
  return [
      [
          rng.normal(size=(3, 2)).astype(np.float32),
          rng.normal(size=(4,)).astype(np.float16),
      ]
      for _ in range(count)
  ]


def _open(window, directory, round_num=None):
  template = _models(1)[0]
  return window.open_files(str(directory), round_num, template)


def _push_all(window, models):
  state = window.initial_state(models[0])
  states = []
  for model in models:
    state = window.push(state, model)
    states.append(state)
  return states


@pytest.mark.parametrize(
    'window_size, extra_sizes',
    [(1, ()), (3, ()), (5, ()), (3, (1, 12, 5))],  # Several on one trajectory.
)
def test_mean_is_the_mean_of_the_last_w_models(
    tmp_path, window_size, extra_sizes
):
  window = aggregators.ProgramWindow(
      window_size=window_size, extra_window_sizes=extra_sizes
  )
  _open(window, tmp_path)
  models = _models(14)
  for t, state in enumerate(_push_all(window, models), start=1):
    assert int(state.num_models) == t
    for size in (window_size, *extra_sizes):
      if t < size:
        assert not window.is_active(state, size)
        continue
      assert window.is_active(state, size)
      # WiMA Eq. 4: m^t = 1/W sum_{k<W} w^{t-k}; models[t-1] is w^t.
      for leaf in range(2):
        expected = np.mean(
            [m[leaf].astype(np.float64) for m in models[t - size : t]],
            axis=0,
        )
        mean = window.mean(state, models[0], size)[leaf]
        assert mean.dtype == models[0][leaf].dtype
        np.testing.assert_allclose(
            mean, expected.astype(mean.dtype), rtol=1e-3 if leaf else 1e-6
        )


@pytest.mark.parametrize(
    'window_size, start_round, read_every, active_rounds',
    [
        (3, 0, 1, [3, 4, 5, 6, 7, 8]),  # From round W.
        (3, 5, 1, [5, 6, 7, 8]),  # From the start round, after W.
        (2, 0, 3, [3, 6]),  # Only at rounds t % E == 0.
    ],
)
def test_active_rounds(
    tmp_path, window_size, start_round, read_every, active_rounds
):
  window = aggregators.ProgramWindow(
      window_size=window_size, start_round=start_round, read_every=read_every
  )
  _open(window, tmp_path)
  states = _push_all(window, _models(8))
  assert [
      t for t, s in enumerate(states, start=1) if window.is_active(s)
  ] == active_rounds


def test_measurements(tmp_path):
  window = aggregators.ProgramWindow(window_size=2)
  _open(window, tmp_path)
  models = _models(3)
  states = _push_all(window, models)
  inactive = window.measurements(states[0], models[0])
  assert (int(inactive['window_fill']), bool(inactive['window_active'])) == (
      1,
      False,
  )
  assert float(inactive['window_distance']) == 0.0
  active = window.measurements(states[2], models[2])
  # ||(w^2 + w^3)/2 - w^3|| = ||w^2 - w^3|| / 2, over both leaves.
  expected = 0.5 * np.sqrt(
      sum(
          np.sum((a.astype(np.float64) - b.astype(np.float64)) ** 2)
          for a, b in zip(models[1], models[2])
      )
  )
  assert int(active['window_fill']) == 2
  np.testing.assert_allclose(active['window_distance'], expected, rtol=1e-3)


@pytest.mark.parametrize(
    'window_size, extra_sizes, first_kept',
    [(3, (), 5), (3, (2,), 5), (2, (3, 1), 5), (1, (4,), 4)],
)
def test_files_of_rounds_no_checkpoint_needs_are_deleted(
    tmp_path, window_size, extra_sizes, first_kept
):
  window = aggregators.ProgramWindow(
      window_size=window_size, extra_window_sizes=extra_sizes
  )
  _open(window, tmp_path)
  _push_all(window, _models(7))
  window.prepare_checkpoint(7)
  window.finish_checkpoint(7, {0, 7})
  # A resume from round 7 reads the largest window's models (W = 3: w^5,
  # w^6, w^7; W = 4: from w^4), and later rounds subtract them.
  assert sorted(os.listdir(tmp_path)) == [
      f'round_{t}.bin' for t in range(first_kept, 8)
  ]


@pytest.mark.parametrize('window_size, extra_sizes', [(3, ()), (2, (3, 1))])
def test_resume_deletes_later_rounds_and_continues_exactly(
    tmp_path, window_size, extra_sizes
):
  models = _models(9)
  build = lambda: aggregators.ProgramWindow(
      window_size=window_size, extra_window_sizes=extra_sizes
  )
  uninterrupted = build()
  _open(uninterrupted, tmp_path / 'a')
  expected = _push_all(uninterrupted, models)[-1]

  window = build()
  _open(window, tmp_path / 'b')
  states = _push_all(window, models[:6])
  window.prepare_checkpoint(4)
  window.finish_checkpoint(4, {4})
  window.close()
  # Killed after round 6; the newest checkpoint is round 4's state.
  resumed = build()
  _open(resumed, tmp_path / 'b', round_num=4)
  assert sorted(os.listdir(tmp_path / 'b')) == [
      'round_2.bin',
      'round_3.bin',
      'round_4.bin',
  ]
  state = states[3]
  for model in models[4:]:
    state = resumed.push(state, model)
  sums = [state.window_sum, *state.extra_sums]
  expected_sums = [expected.window_sum, *expected.extra_sums]
  assert len(sums) == 1 + len(extra_sizes)
  for got, want in zip(sums, expected_sums):
    for a, b in zip(got, want):
      np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('window_size, extra_sizes', [(3, ()), (1, (3,))])
def test_resume_without_a_window_model_fails(
    tmp_path, window_size, extra_sizes
):
  build = lambda: aggregators.ProgramWindow(
      window_size=window_size, extra_window_sizes=extra_sizes
  )
  window = build()
  _open(window, tmp_path)
  _push_all(window, _models(4))
  os.remove(tmp_path / 'round_3.bin')
  with pytest.raises(
      aggregators.MissingWindowModelsError, match='round 3.*round 4'
  ):
    _open(build(), tmp_path, round_num=4)


def test_a_directory_with_other_files_is_refused(tmp_path):
  (tmp_path / 'notes.txt').write_text('mine')
  with pytest.raises(aggregators.WindowFilesError, match='notes.txt'):
    _open(aggregators.ProgramWindow(window_size=2), tmp_path)


def test_files_are_private(tmp_path):
  directory = tmp_path / 'window'
  window = aggregators.ProgramWindow(window_size=2)
  _open(window, directory)
  _push_all(window, _models(1))
  assert os.stat(directory).st_mode & 0o777 == 0o700
  assert os.stat(directory / 'round_1.bin').st_mode & 0o777 == 0o600


def test_push_before_open_fails():
  window = aggregators.ProgramWindow(window_size=2)
  models = _models(1)
  with pytest.raises(ValueError, match='open_files'):
    window.push(window.initial_state(models[0]), models[0])


def test_a_model_of_another_shape_is_refused(tmp_path):
  window = aggregators.ProgramWindow(window_size=2)
  _open(window, tmp_path)
  model = _models(1)[0]
  with pytest.raises(ValueError, match='shape'):
    window.push(
        window.initial_state(model), [np.zeros((2, 2), np.float32), model[1]]
    )


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(window_size=0), 'window_size'),
        (dict(window_size=2, mode='average'), 'mode'),
        (dict(window_size=2, start_round=-1), 'start_round'),
        (dict(window_size=2, mode='broadcast', read_every=2), 'read_every'),
        (dict(window_size=2, extra_window_sizes=(3, 0)), 'extra_window_sizes'),
        (dict(window_size=2, extra_window_sizes=(3, 3)), 'distinct'),
        (dict(window_size=2, extra_window_sizes=(2,)), 'must not repeat'),
        (dict(window_size=2, extra_window_sizes=(1.5,)), 'ints >= 1'),
    ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    aggregators.ProgramWindow(**kwargs)


def test_round_files_round_trip(tmp_path):
  files = round_model_files.RoundModelFiles(_models(1)[0])
  files.open(str(tmp_path), None)
  model = _models(2, seed=3)[1]
  files.write(4, model)
  for a, b in zip(files.read(4), model):
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


def test_extra_window_measurements_and_unknown_sizes(tmp_path):
  window = aggregators.ProgramWindow(window_size=1, extra_window_sizes=(2,))
  _open(window, tmp_path)
  models = _models(3)
  state = _push_all(window, models)[2]
  measured = window.measurements(state, models[2], window_size=2)
  # ||(w^2 + w^3)/2 - w^3|| = ||w^2 - w^3|| / 2, over both leaves.
  expected = 0.5 * np.sqrt(
      sum(
          np.sum((a.astype(np.float64) - b.astype(np.float64)) ** 2)
          for a, b in zip(models[1], models[2])
      )
  )
  assert (int(measured['window_fill']), bool(measured['window_active'])) == (
      2,
      True,
  )
  np.testing.assert_allclose(measured['window_distance'], expected, rtol=1e-3)
  # The main window (W = 1) is w^3 itself.
  assert float(window.measurements(state, models[2])['window_distance']) == 0
  with pytest.raises(ValueError, match='neither the window size'):
    window.mean(state, models[0], 5)


@pytest.mark.parametrize(
    'saved_sizes, sizes',
    [
        ((3, (5, 50)), (3, (50, 5))),  # Reordered: the sums would swap.
        ((3, (5, 50)), (3, (10, 50))),  # Same count and largest W.
        ((3, ()), (4, ())),
        ((3, (5,)), (3, ())),
    ],
)
def test_a_state_of_other_window_sizes_is_refused(tmp_path, saved_sizes, sizes):
  saved = aggregators.ProgramWindow(
      window_size=saved_sizes[0], extra_window_sizes=saved_sizes[1]
  )
  window = aggregators.ProgramWindow(
      window_size=sizes[0], extra_window_sizes=sizes[1]
  )
  _open(window, tmp_path)
  state = saved.initial_state(_models(1)[0])
  with pytest.raises(
      aggregators.WindowSizesMismatchError, match='--window_sizes'
  ):
    window.check_state(state)
  with pytest.raises(
      aggregators.WindowSizesMismatchError,
      match='The saved window state keeps window sizes ',
  ):
    window.push(state, _models(1)[0])
