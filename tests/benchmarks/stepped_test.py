"""`stepped.SteppedRow`: a prepared row timed as a `rounds.RowFn`."""

import pytest

from tff_fedwin.benchmarks import stepped


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
