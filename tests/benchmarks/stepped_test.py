"""`stepped.SteppedRow`: a prepared row timed as a `rounds.RowFn`."""

import collections
import shutil

import numpy as np
import pytest
import tensorflow as tf

from benchmarks import stepped


def _rounds(log, fail_at=None):
  def rounds(data):
    log.append(('prepare', data))

    def next_round():
      log.append('next')
      if fail_at is not None and log.count('next') == fail_at:
        raise RuntimeError('round failed')

    return stepped.Rounds(
        next_round, lambda: 4.5, close=lambda: log.append('close')
    )

  return rounds


def test_stepped_row_prepares_steps_and_closes():
  log = []

  seconds, mb = stepped.SteppedRow(_rounds(log))('data', 3)

  assert log == [('prepare', 'data'), 'next', 'next', 'next', 'close']
  assert seconds >= 0.0 and mb == 4.5


def test_stepped_row_closes_when_a_round_fails():
  log = []

  with pytest.raises(RuntimeError, match='round failed'):
    stepped.SteppedRow(_rounds(log, fail_at=2))('data', 3)

  assert log[-1] == 'close'


def test_client_data_by_id_serves_the_rows_batches_from_a_bundle():
  # Two clients of 5 and 4 examples, batched by 2 as a row's data is: the
  # worker's datasets must hold the same batches, [2, 2, 1] and [2, 2].
  arrays = [
      np.arange(5.0, dtype=np.float32),
      np.arange(10.0, 14.0, dtype=np.float32),
  ]
  data = [
      tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=a)).batch(2)
      for a in arrays
  ]

  ids, computation, directory = stepped.client_data_by_id(data, True)
  try:
    assert ids == ['0', '1']
    for client_id, array in zip(ids, arrays):
      batches = [b['x'] for b in computation(client_id)]
      assert [len(b) for b in batches] == [2, 2, 1][: len(batches)]
      np.testing.assert_array_equal(np.concatenate(batches), array)
  finally:
    shutil.rmtree(directory)


def test_client_data_by_id_leaves_data_alone_unless_wanted():
  assert stepped.client_data_by_id(['d'], False) == (['d'], None, None)
