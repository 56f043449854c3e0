"""Benchmark rows of learning processes with the window kept by the program.

Used by scripts/benchmark_window.py next to the rows of `benchmarks.rounds`:
the same timing (one warm-up round, then the timed rounds), through
`ProgramWindowRunner.run_round`, so a row includes the window's file write,
read-back and running sum (docs/design.md sec. 1.10).
"""

import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tff_fedwin.algorithms import program_window_runner
from tff_fedwin.algorithms import runners
from tff_fedwin.benchmarks import rounds


def program_window_row(
    build: Callable[[], Any], **window_args: Any
) -> rounds.RowFn:
  """Times rounds of the LearningProcess `build()` with a `ProgramWindow`.

  Args:
    build: Builds a `tff.learning.templates.LearningProcess` without a window.
    **window_args: `ProgramWindow`'s arguments (`window_size`, `mode`, ...).

  Returns:
    A row function; its state MB is the process state's (what crosses the
    Python boundary), without the window's float64 sum kept in the driver.
  """

  def run(data, num_rounds):
    runner = program_window_runner.ProgramWindowRunner(
        runners.LearningProcessRunner(build()),
        program_window_runner.ProgramWindow(**window_args),
    )
    with tempfile.TemporaryDirectory() as directory:
      state = runner.initialize()
      files = runner.open_files(directory, None, state)
      try:
        state, _, _ = runner.run_round(state, data, None)  # Warm-up.
        start = time.perf_counter()
        for _ in range(num_rounds):
          state, _, _ = runner.run_round(state, data, None)
        seconds = (time.perf_counter() - start) / num_rounds
      finally:
        files.close()
    return seconds, rounds.state_mb(state.process)

  return run


def window_work_seconds(
    template: Any, window_size: int, rounds: int = 20, seed: int = 0
) -> float:
  """Median seconds of the window's own work in a round, measured apart.

  Pushes random models shaped like `template` (numpy arrays) for
  `window_size + rounds` rounds, the files in a temporary directory, and
  times each round after the window is full: `push` (write w^t, read back
  w^{t-W}, the running sum), the window model (the mean) and
  `measurements`, as `ProgramWindowRunner.run_round` does.
  """
  rng = np.random.default_rng(seed)
  models = [
      [(x + rng.normal(size=np.shape(x))).astype(x.dtype) for x in template]
      for _ in range(3)
  ]
  window = program_window_runner.ProgramWindow(window_size=window_size)
  times = []
  with tempfile.TemporaryDirectory() as directory:
    window.open_files(directory, None, template)
    state = window.initial_state(template)
    for t in range(window_size + rounds):
      model = models[t % len(models)]
      start = time.perf_counter()
      state = window.push(state, model)
      window.measurements(state, model, window.window_model(state, model))
      times.append(time.perf_counter() - start)
    window.close()
  return statistics.median(times[window_size:])
