"""Tests for benchmarks.program_window_rows."""

import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import program_window_rows
from tests import linear_task
from tff_fedwin.algorithms import fed_win


def test_row_runs_the_rounds_and_reports_the_process_state_only():
  build = _linear_fed_win
  run = program_window_rows.program_window_row(
      build, window_size=2, mode='broadcast'
  )

  seconds, state_mb = run(linear_task.client_datasets(), 2)

  assert seconds > 0
  # The process state has the same arrays as the process's initial state
  # (a window-less build_fed_win state); the window's float64 sum of the 3x1
  # kernel (24 bytes) stays in the driver and is not counted.
  process_bytes = sum(
      np.asarray(x).nbytes for x in tf.nest.flatten(build().initialize())
  )
  assert state_mb * 2**20 == process_bytes


def _pushed_round_numbers(monkeypatch) -> list[int]:
  """Records the round number t of every `ProgramWindow.push` from now on."""
  calls = []
  original = program_window_rows.program_window_runner.ProgramWindow.push

  def push(window, state, model):
    calls.append(int(state.num_models) + 1)
    return original(window, state, model)

  monkeypatch.setattr(
      program_window_rows.program_window_runner.ProgramWindow, 'push', push
  )
  return calls


def _linear_fed_win():
  return fed_win.build_fed_win(
      linear_task.model_fn, tff.learning.optimizers.build_sgdm(0.1)
  )


def test_row_fills_the_window_before_its_rounds(monkeypatch):
  calls = _pushed_round_numbers(monkeypatch)
  run = program_window_rows.program_window_row(
      _linear_fed_win, window_size=3, extra_window_sizes=(4,)
  )

  run(linear_task.client_datasets(), 2)

  # The largest window (4) is filled by pushes 1-4; then the warm-up round
  # pushes w^5 and the two timed rounds w^6, w^7, each reading back w^{t-4}.
  assert calls == list(range(1, 8))


@pytest.mark.parametrize('server_state_files', [False, True])
def test_rounds_keep_their_files_until_closed(
    monkeypatch, tmp_path, server_state_files
):
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
  row = program_window_rows.program_window_row(
      _linear_fed_win, server_state_files=server_state_files, window_size=2
  )

  prepared = row.rounds(linear_task.client_datasets())
  prepared.next()
  names = sorted(p.name.split('_')[0] for p in tmp_path.iterdir())
  prepared.close()

  # The window's model files, and the server state's files if asked for.
  assert names == (['program', 'server'] if server_state_files else ['program'])
  assert not list(tmp_path.iterdir())


def test_window_work_is_timed_after_the_window_is_full(monkeypatch):
  calls = _pushed_round_numbers(monkeypatch)
  seconds = program_window_rows.window_work_seconds(
      [np.zeros((2, 3), np.float32)], window_size=3, rounds=4
  )

  assert seconds > 0
  # W = 3 rounds fill the window, then 4 timed rounds read w^{t-W} back.
  assert calls == list(range(1, 8))
