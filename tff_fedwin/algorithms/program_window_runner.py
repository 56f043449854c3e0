"""A round runner with the window kept by the program, for any process.

`ProgramWindowRunner` wraps the runner of a process *without* a window
(`build_fed_win(window_size=None)`, TFF's builders, `build_scaffold`) and
keeps a `tff_fedwin.aggregators.ProgramWindow` of its global models next to
the loop: the process state stays the size of one model whatever W is
(docs/design.md sec. 1.10).
"""

import collections
from collections.abc import Sequence
import os
from typing import Any, NamedTuple, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import round_runner
from tff_fedwin.aggregators import program_window
from tff_fedwin.aggregators import window_readout
from tff_fedwin.algorithms import extra_windows

ModelWeights = tff.learning.models.ModelWeights
ProgramWindow = program_window.ProgramWindow
WindowSizesMismatchError = program_window.WindowSizesMismatchError
extra_window_name = extra_windows.extra_window_name

# The window's directory in the run's checkpoint directory.
WINDOW_SUBDIR = 'window_models'


class ProgramWindowRunnerState(NamedTuple):
  """The server state of a `ProgramWindowRunner`.

  Attributes:
    process: The wrapped runner's server state.
    window: The `tff_fedwin.aggregators.ProgramWindowState`.
  """

  process: Any
  window: program_window.ProgramWindowState


class ProgramWindowRunner(round_runner.RoundRunner):
  """Runs `runner`'s process and keeps the window of its global models.

  After each round the new global model w^t is pushed to the window; in
  `'broadcast'` mode (IMA) at active rounds the process state's model is
  replaced by m^t through `runner.set_global_model_weights`, so the clients
  start the next round from it while the window keeps w^t (docs/design.md
  sec. 1.3). The round's metrics gain `window` (`window_fill`,
  `window_active`, `window_distance`), as with the window in the state, and
  `window_<W>` of each extra window size (`extra_window_models` gives the
  loop their models to evaluate, sec. 1.11).

  `run_training` calls `open_files(checkpoint_dir, round_num, state)` before the
  first round; the window's models then live in
  `<checkpoint_dir>/window_models/`, one file per round of the last W (the
  largest W with extra window sizes; plus those since the last checkpoint).
  """

  def __init__(self, runner: Any, window: program_window.ProgramWindow):
    """Initializes the runner.

    Args:
      runner: A `tff_fedwin.training.RoundRunner` whose state holds no window;
        in `'broadcast'` mode it must have `set_global_model_weights(state,
        weights)` (`LearningProcessRunner` and `ScaffoldRunner` have it).
      window: The `tff_fedwin.aggregators.ProgramWindow`.

    Raises:
      ValueError: If an argument has the wrong type or lacks a method
        (`initialize` raises it if the process keeps a window itself).
    """
    if not isinstance(window, program_window.ProgramWindow):
      raise ValueError(
          '`window` must be a tff_fedwin.aggregators.ProgramWindow, got '
          f'{type(window).__name__}.'
      )
    if not isinstance(runner, round_runner.RoundRunner):
      raise ValueError(
          '`runner` must be a tff_fedwin.training.RoundRunner, got '
          f'{type(runner).__name__}.'
      )
    if (
        window.mode == 'broadcast'
        and not round_runner.sets_global_model_weights(runner)
    ):
      raise ValueError(
          "A window in 'broadcast' mode needs a `runner` with "
          f'`set_global_model_weights`; {type(runner).__name__} has none.'
      )
    self._runner = runner
    self._window = window

  @property
  def takes_client_ids(self) -> bool:
    """Whether the wrapped runner's `run_round` takes client ids."""
    return self._runner.takes_client_ids

  @property
  def window(self) -> program_window.ProgramWindow:
    return self._window

  def initialize(self) -> ProgramWindowRunnerState:
    """The wrapped runner's initial state and an empty window."""
    state = self._runner.initialize()
    if window_readout.holds_window(state):
      raise ValueError(
          "`runner`'s process already keeps a window in its state; build it "
          'without one (window_size=None) for a ProgramWindowRunner.'
      )
    trainable = self._runner.global_model_weights(state).trainable
    return ProgramWindowRunnerState(
        state, self._window.initial_state(trainable)
    )

  def initial_client_state(self) -> Optional[Any]:
    return self._runner.initial_client_state()

  def open_files(
      self,
      checkpoint_dir: str,
      round_num: Optional[int],
      state: ProgramWindowRunnerState,
  ) -> program_window.ProgramWindow:
    """The window's files in `<checkpoint_dir>/window_models` (loop hook).

    Args:
      checkpoint_dir: The run's checkpoint directory.
      round_num: The round the run resumes from; None for a fresh run.
      state: The server state the run starts from.

    Returns:
      The window, whose checkpoint steps the loop runs with each checkpoint.

    Raises:
      WindowSizesMismatchError: If `state` was saved with other window sizes.
    """
    self._window.check_state(state.window)
    template = self.global_model_weights(state).trainable
    return self._window.open_files(
        os.path.join(checkpoint_dir, WINDOW_SUBDIR), round_num, template
    )

  def run_round(
      self,
      state: ProgramWindowRunnerState,
      datasets: Sequence[tf.data.Dataset],
      client_states: Optional[list[Any]],
  ) -> tuple[ProgramWindowRunnerState, Optional[list[Any]], Any]:
    """One round of the wrapped runner, then the window step."""
    process_state, new_client_states, metrics = self._runner.run_round(
        state.process, datasets, client_states
    )
    weights = self._runner.global_model_weights(process_state)
    window = self._window.push(state.window, weights.trainable)
    window_model = self._window.window_model(window, weights.trainable)
    if self._window.sends_mean(window):
      sent = ModelWeights(window_model, weights.non_trainable)
      process_state = self._runner.set_global_model_weights(process_state, sent)
    measurements = collections.OrderedDict(
        window=self._window.measurements(
            window, weights.trainable, window_model
        )
    )
    for size in self._window.extra_window_sizes:
      measurements[extra_window_name(size)] = self._window.measurements(
          window, weights.trainable, window_size=size
      )
    return (
        ProgramWindowRunnerState(process_state, window),
        new_client_states,
        extra_windows.with_measurements(metrics, measurements),
    )

  def global_model_weights(
      self, state: ProgramWindowRunnerState
  ) -> ModelWeights:
    """The global model of the process state (m^t after an IMA round)."""
    return self._runner.global_model_weights(state.process)

  def window_model_weights(
      self, state: ProgramWindowRunnerState
  ) -> ModelWeights:
    """m^t when active in `'evaluate'` mode, else the global model.

    In `'broadcast'` mode the global model already is m^t at active rounds.
    """
    weights = self.global_model_weights(state)
    if self._window.mode == 'evaluate' and self._window.is_active(state.window):
      return ModelWeights(
          self._window.mean(state.window, weights.trainable),
          weights.non_trainable,
      )
    return weights

  def has_window(self, state: ProgramWindowRunnerState) -> bool:
    """True: the program keeps the window."""
    del state  # Unused.
    return True

  def extra_window_models(
      self, state: ProgramWindowRunnerState
  ) -> 'collections.OrderedDict[str, ModelWeights]':
    """`window_<W>` -> the model to evaluate of each extra window size W.

    m^t of that window when active (WiMA Eq. 4), else the global model. In
    `'broadcast'` mode also `aggregate` -> the round's w^t as pushed
    (`extra_windows.aggregate_model`).
    """
    weights = self.global_model_weights(state)
    models = collections.OrderedDict(
        (
            extra_window_name(size),
            ModelWeights(
                self._window.window_model(
                    state.window, weights.trainable, size
                ),
                weights.non_trainable,
            ),
        )
        for size in self._window.extra_window_sizes
    )
    if self._window.mode == 'broadcast':
      models[extra_windows.AGGREGATE_NAME] = ModelWeights(
          self._window.newest_model(state.window, weights.trainable),
          weights.non_trainable,
      )
    return models
