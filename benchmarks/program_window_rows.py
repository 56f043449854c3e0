"""Benchmark rows of learning processes with the window kept by the program.

Used by scripts/benchmark_window.py and scripts/benchmark.py next to the rows
of `benchmarks.rounds`: the same timing (one warm-up round, then the timed
rounds, or rounds interleaved with the bound's by `benchmarks.paired`), through
`ProgramWindowRunner.run_round`, so a row includes the window's file write,
read-back and running sum (docs/design.md sec. 1.10).
"""

import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import rounds as rounds_lib
from benchmarks import stepped
from tff_fedwin.algorithms import program_window_runner
from tff_fedwin.algorithms import runners


def program_window_row(
    build: Callable[[], Any],
    *,
    server_state_files: bool = False,
    client_data_by_id: bool = False,
    **window_args: Any,
) -> stepped.SteppedRow:
  """Rounds of the LearningProcess `build()` with a `ProgramWindow`.

  Each round is one `ProgramWindowRunner.run_round`, as the training loop
  runs it: the process's round, then the window's file write, read-back and
  running sum (and, in `'broadcast'` mode, m^t set into the state). The
  window is filled first (`_filled`), so every round, the warm-up included,
  does the work of a full window, as in a long run. Stepped, so
  `benchmarks.paired` can interleave it with its own bound.

  Args:
    build: Builds a `tff.learning.templates.LearningProcess` without a window.
    server_state_files: If True, the process's server state stays in files
      between rounds (`LearningProcessRunner(server_state_dir=...)`, the
      default of the training loop with local workers).
    client_data_by_id: If True, the worker builds the clients' datasets from
      a tensor bundle by id (`stepped.client_data_by_id`; the default with
      local workers too).
    **window_args: `ProgramWindow`'s arguments (`window_size`, `mode`, ...).

  Returns:
    A row; its state MB is the process state's (what crosses the Python
    boundary), without the window's float64 sum kept in the driver.
  """

  def rounds(data):
    server = stepped.temporary_directory(server_state_files, 'server_state_')
    window_dir = tempfile.mkdtemp(prefix='program_window_')
    data, computation, bundle = stepped.client_data_by_id(
        data, client_data_by_id
    )
    runner = program_window_runner.ProgramWindowRunner(
        runners.LearningProcessRunner(
            build(), server_state_dir=server, dataset_computation=computation
        ),
        program_window_runner.ProgramWindow(**window_args),
    )
    state = [runner.initialize()]
    files = runner.open_files(window_dir, None, state[0])
    state[0] = _filled(runner, state[0])

    def next_round():
      state[0] = runner.run_round(state[0], data, None)[0]

    try:
      prepared = stepped.warmed_up(
          next_round,
          lambda: rounds_lib.state_mb(state[0].process),
          server,
          window_dir,
          bundle,
      )
    except BaseException:
      files.close()
      raise

    def close():
      files.close()
      prepared.close()

    return prepared._replace(close=close)

  return stepped.SteppedRow(rounds)


def _filled(runner, state):
  """`state` with the initial model pushed until the largest window is full.

  The pushes are driver-side file writes, no rounds of the process: the
  rounds timed after them write w^t and read back w^{t-W} as a long run's
  do, instead of the first W rounds' writes only.
  """
  window = runner.window
  model = runner.global_model_weights(state).trainable
  window_state = state.window
  for _ in range(window.largest_window_size):
    window_state = window.push(window_state, model)
  return state._replace(window=window_state)


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
