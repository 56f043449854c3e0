"""Tests for tff_fedwin.benchmarks.program_window_rows."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear_task
from tff_fedwin.algorithms import fed_win
from tff_fedwin.benchmarks import program_window_rows


def test_row_runs_the_rounds_and_reports_the_process_state_only():
  build = lambda: fed_win.build_fed_win(
      linear_task.model_fn, tff.learning.optimizers.build_sgdm(0.1)
  )
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


def test_window_work_is_timed_after_the_window_is_full(monkeypatch):
  calls = []
  original = program_window_rows.program_window_runner.ProgramWindow.push

  def push(window, state, model):
    calls.append(int(state.num_models) + 1)
    return original(window, state, model)

  monkeypatch.setattr(
      program_window_rows.program_window_runner.ProgramWindow, 'push', push
  )
  seconds = program_window_rows.window_work_seconds(
      [np.zeros((2, 3), np.float32)], window_size=3, rounds=4
  )

  assert seconds > 0
  # W = 3 rounds fill the window, then 4 timed rounds read w^{t-W} back.
  assert calls == list(range(1, 8))
