"""Tests for tff_fedwin.training.progress: the lines a run prints."""

import pytest

from tff_fedwin.training import progress


@pytest.mark.parametrize(
    'seconds, text',
    [
        (0.4, '0:00:00'),
        (59.6, '0:01:00'),
        (3725, '1:02:05'),
    ],
)
def test_format_seconds(seconds, text):
  assert progress.format_seconds(seconds) == text


def test_eval_text_lists_the_eval_columns_only():
  values = {
      'train/loss': 0.5,
      'round_time_seconds': 1.0,
      'window/accuracy': 0.9,
      'global/accuracy': 0.81234,
      'eval_time_seconds': 2.0,
  }
  assert progress.eval_text(values) == (
      ', window/accuracy 0.9000, global/accuracy 0.8123'
  )
  assert progress.eval_text({'train/loss': 0.5}) == ''


def _lines(capsys):
  return capsys.readouterr().out.splitlines()


def test_printer_prints_first_and_eval_rounds(capsys):
  printer = progress.ProgressPrinter(
      experiment_name='exp', first_round=3, total_rounds=6
  )
  for round_num, values in (
      (3, {}),
      (4, {'window/loss': 1.0}),
      (5, {}),
      (6, {'window/loss': 0.5}),
  ):
    printer.round_done(
        round_num=round_num, round_time=2.0, iteration_time=4.0, values=values
    )

  # ETA: mean iteration time 4 s times the rounds left.
  assert _lines(capsys) == [
      'exp: round 3/6 2.00s, ETA 0:00:12',
      'exp: round 4/6 2.00s, ETA 0:00:08, window/loss 1.0000',
      'exp: round 6/6 2.00s, ETA 0:00:00, window/loss 0.5000',
  ]


def test_printer_prints_a_round_after_the_interval(capsys, monkeypatch):
  clock = [100.0]
  monkeypatch.setattr(progress.time, 'monotonic', lambda: clock[0])
  printer = progress.ProgressPrinter(
      experiment_name='exp', first_round=1, total_rounds=9
  )
  printer.round_done(round_num=1, round_time=1.0, iteration_time=1.0, values={})
  clock[0] += progress.PROGRESS_INTERVAL_SECONDS - 1
  printer.round_done(round_num=2, round_time=1.0, iteration_time=1.0, values={})
  clock[0] += 1
  printer.round_done(round_num=3, round_time=1.0, iteration_time=1.0, values={})

  assert [l.split()[2] for l in _lines(capsys)] == ['1/9', '3/9']


def test_eval_text_without_a_window_leaves_its_columns_out():
  values = {
      'window/accuracy': 0.5,
      'global/accuracy': 0.5,
      'aggregate/accuracy': 0.25,
      'window_50/accuracy': 0.75,
  }
  assert progress.eval_text(values, show_window=False) == (
      ', global/accuracy 0.5000, aggregate/accuracy 0.2500'
  )


def test_printer_without_a_window_prints_the_global_figures(capsys):
  printer = progress.ProgressPrinter(
      experiment_name='exp', first_round=1, total_rounds=1, show_window=False
  )
  printer.round_done(
      round_num=1,
      round_time=2.0,
      iteration_time=4.0,
      values={'window/loss': 1.0, 'global/loss': 1.0},
  )
  assert _lines(capsys) == [
      'exp: round 1/1 2.00s, ETA 0:00:00, global/loss 1.0000'
  ]
