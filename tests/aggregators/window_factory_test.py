"""Tests for WindowedModelAveragingFactory and its read-out, run round by round.

Expected values come from numpy written here or in tests/numpy_reference.py
from WiMA Eq. 4/6 and IMA Algorithm 1, never from the code under test.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import numpy_reference as ref
from tests.aggregators import window_factory_fixtures
from tff_fedwin.aggregators import WindowedModelAveragingFactory
from tff_fedwin.aggregators.window_readout import window_offset_numpy

VALUE_TYPE = window_factory_fixtures.VALUE_TYPE
WEIGHT_TYPE = window_factory_fixtures.WEIGHT_TYPE
_SumPlusOneFactory = window_factory_fixtures.SumPlusOneFactory


def _client_values(t, num_clients=3):
  """Deterministic client deltas and weights for round t (1-based)."""
  rng = np.random.default_rng(100 + t)
  values = [
      [
          rng.normal(size=2).astype(np.float32),
          rng.normal(size=3).astype(np.float32),
      ]
      for _ in range(num_clients)
  ]
  weights = [float(w) for w in rng.integers(1, 5, size=num_clients)]
  return values, weights


def _weighted_mean(values, weights):
  return [
      sum(w * v[i] for v, w in zip(values, weights)) / sum(weights)
      for i in range(2)
  ]


def _flat(structure):
  return np.concatenate(
      [np.ravel(np.asarray(x, np.float64)) for x in tf.nest.flatten(structure)]
  )


def _run_rounds(process, num_rounds):
  """Yields `(t, output, flat mean client delta)` for rounds 1..num_rounds."""
  state = process.initialize()
  for t in range(1, num_rounds + 1):
    values, weights = _client_values(t)
    output = process.next(state, values, weights)
    state = output.state
    yield t, output, _flat(_weighted_mean(values, weights))


GRID = [
    (w, start, mode)
    for w in (1, 3, 5)
    for start in (0, w + 2)
    for mode in ('evaluate', 'broadcast')
]


class TestWindowedModelAveragingFactoryExecution:

  @pytest.mark.parametrize('window_size,start_round,mode', GRID)
  def test_aggregation_process_tracks_window_of_models(
      self, window_size, start_round, mode
  ):
    # The factory sees deltas a_t; with server SGD(1.0) the aggregated model is
    # u^t = x^{t-1} - a_t and the clients next start from x^t = m^t (broadcast,
    # active) or u^t. Models are positions relative to w^0 = 0 here.
    process = WindowedModelAveragingFactory(
        window_size, mode=mode, start_round=start_round
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    x = np.zeros(5)
    aggregated = [np.zeros(5)]
    for t, output, mean_delta in _run_rounds(process, 2 * window_size + 3):
      state = output.state
      u = x - mean_delta
      aggregated.append(u)
      active = t >= max(window_size, start_round)
      m = ref.window_mean_eq4(aggregated, t, window_size) if active else u
      new_x = m if (mode == 'broadcast' and active) else u
      # Emitted aggregate: x^{t-1} - x^t.
      np.testing.assert_allclose(
          _flat(output.result), x - new_x, atol=1e-5, err_msg=f'round {t}'
      )
      if mode == 'evaluate':
        # Window offset m^t - w^t, as window_model_weights adds it.
        offset = window_offset_numpy(state.window, state.position)
        if active:
          np.testing.assert_allclose(_flat(offset), m - u, atol=1e-5)
          np.testing.assert_allclose(
              _flat(offset) + u,
              ref.window_mean_eq6(aggregated, t, window_size),
              atol=1e-5,
          )
        else:
          assert offset is None
      measured = output.measurements['window']
      assert measured['window_fill'] == min(t, window_size)
      assert bool(measured['window_active']) == active
      np.testing.assert_allclose(
          measured['window_distance'], np.linalg.norm(m - u), atol=1e-5
      )
      x = new_x

  @pytest.mark.parametrize(
      'window_size,read_every', [(5, 2), (6, 3), (7, 3), (3, 10), (10, 10)]
  )
  def test_read_every_is_exact_at_read_rounds_with_ceil_slots(
      self, window_size, read_every
  ):
    process = WindowedModelAveragingFactory(
        window_size, read_every=read_every
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    state = process.initialize()
    assert state.window.slots[0].shape[0] == -(-window_size // read_every)
    aggregated = [np.zeros(5)]
    for t in range(1, 3 * max(window_size, read_every) + 2):
      values, weights = _client_values(t)
      state = process.next(state, values, weights).state
      aggregated.append(aggregated[-1] - _flat(_weighted_mean(values, weights)))
      offset = window_offset_numpy(state.window, state.position)
      if t >= window_size and t % read_every == 0:
        np.testing.assert_allclose(
            _flat(offset),
            ref.window_mean_eq4(aggregated, t, window_size) - aggregated[t],
            atol=1e-5,
            err_msg=f'round {t}',
        )
      else:
        assert offset is None, f'round {t}'

  @pytest.mark.parametrize(
      'window_size,read_every,mode,start_round,extra_sizes',
      [
          (6, 1, 'evaluate', 0, (1, 2, 5)),
          (7, 3, 'evaluate', 0, (1, 4)),  # W - W' a multiple of E = 3.
          (6, 2, 'evaluate', 5, (2, 4)),
          (4, 1, 'broadcast', 6, (1, 3)),
      ],
  )
  def test_extra_window_sizes_read_from_the_same_slots(
      self, window_size, read_every, mode, start_round, extra_sizes
  ):
    # Another W' is the mean of the last W' aggregated models u^t (WiMA Eq. 4
    # with W'), active at t >= max(W', start_round) with t % E == 0, in
    # either mode; the read-out gives its offset from the position x^t.
    process = WindowedModelAveragingFactory(
        window_size, mode=mode, start_round=start_round, read_every=read_every
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    x = np.zeros(5)
    aggregated = [np.zeros(5)]
    for t, output, mean_delta in _run_rounds(process, 3 * window_size + 1):
      state = output.state
      u = x - mean_delta
      aggregated.append(u)
      x = x - _flat(output.result)
      for size in extra_sizes:
        offset = window_offset_numpy(state.window, state.position, size)
        if t >= max(size, start_round) and t % read_every == 0:
          np.testing.assert_allclose(
              _flat(offset),
              ref.window_mean_eq4(aggregated, t, size) - x,
              atol=1e-5,
              err_msg=f"round {t}, W' = {size}",
          )
        else:
          assert offset is None, f"round {t}, W' = {size}"

  def test_named_constructors_set_mode_and_start_round(self):
    # WiMA: evaluate mode from round W (paper W = 100); IMA: broadcast mode,
    # window P = 5 by default, from the given start round.
    wima = (
        WindowedModelAveragingFactory.wima()
        .create(VALUE_TYPE, WEIGHT_TYPE)
        .initialize()
        .window
    )
    assert (int(wima.window_size), int(wima.start_round)) == (100, 0)
    assert not wima.broadcast
    ima = (
        WindowedModelAveragingFactory.ima(start_round=7)
        .create(VALUE_TYPE, WEIGHT_TYPE)
        .initialize()
        .window
    )
    assert (int(ima.window_size), int(ima.start_round)) == (5, 7)
    assert ima.broadcast

  def test_unweighted_inner_factory_gives_unweighted_mean(self):
    process = WindowedModelAveragingFactory(
        2, inner_factory=tff.aggregators.UnweightedMeanFactory()
    ).create(VALUE_TYPE)
    state = process.initialize()
    values, _ = _client_values(1)
    output = process.next(state, values)
    np.testing.assert_allclose(
        _flat(output.result),
        _flat(_weighted_mean(values, [1.0, 1.0, 1.0])),
        atol=1e-6,
    )

  def test_inner_factory_is_used(self):
    process = WindowedModelAveragingFactory(
        2, inner_factory=_SumPlusOneFactory()
    ).create(VALUE_TYPE, WEIGHT_TYPE)
    values, weights = _client_values(1)
    output = process.next(process.initialize(), values, weights)
    expected = [sum(v[i] for v in values) + 1.0 for i in range(2)]
    np.testing.assert_allclose(_flat(output.result), _flat(expected), atol=1e-5)
