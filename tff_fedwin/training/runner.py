"""The interface between the training loop and a federated process.

`run_training` drives any process through a `RoundRunner`; the runners of this
package's algorithms are in `tff_fedwin.algorithms.runners`.
"""

from collections.abc import Sequence
from typing import Any, Optional, Protocol

import tensorflow as tf
import tensorflow_federated as tff

ModelWeights = tff.learning.models.ModelWeights

# The methods `run_training` calls; `check_runner` looks for each of them.
RUNNER_METHODS = (
    'initialize',
    'initial_client_state',
    'run_round',
    'global_model_weights',
    'window_model_weights',
)


class RoundRunner(Protocol):
  """What `run_training` needs from a process, one round at a time.

  The loop owns the clients' states: when `initial_client_state()` is not
  None it keeps a `tff_fedwin.training.ClientStateStore` made from it, passes
  the sampled clients' states to `run_round` and stores the returned ones.

  Optionally, a runner that keeps files next to the checkpoints (e.g.
  `tff_fedwin.algorithms.ProgramWindowRunner`'s window models) has
  `open_files(checkpoint_dir, round_num, state)`: the loop calls it once
  before the first round (`round_num`: the checkpoint resumed from, None for
  a fresh run) and runs the returned object's `prepare_checkpoint`,
  `finish_checkpoint` and `close` with every checkpoint, after the client
  states' (`tff_fedwin.training.checkpoint_steps.CheckpointSteps`).

  Optionally too, a runner with several windows on one trajectory has
  `extra_window_models(state)`: name (e.g. `window_50`) -> `ModelWeights`;
  the loop evaluates each with the window and global models and writes
  `<name>/<metric>` columns (`training.metrics.evaluate_models`).

  Optionally, a runner whose workers build the clients' datasets themselves
  (e.g. a `LearningProcessRunner` with a `dataset_computation`) has
  `takes_client_ids` True: the loop then passes `run_round` the sampled
  clients' ids in place of their datasets (`takes_client_ids(runner)`).

  Optionally, `has_window(state)` says whether `window_model_weights` is a
  window model at all (False: it is w^t, and the console and the printed
  summary leave the `window/` figures out; `metrics.csv` keeps its columns).
  A runner without it is taken to have one (`has_window(runner, state)`).
  """

  def initialize(self) -> Any:
    """The initial server state."""

  def initial_client_state(self) -> Optional[Any]:
    """Every client's state before its first round; None: no client states."""

  def run_round(
      self,
      state: Any,
      datasets: Sequence[tf.data.Dataset],
      client_states: Optional[list[Any]],
  ) -> tuple[Any, Optional[list[Any]], Any]:
    """One round: `(state, datasets, client_states) -> (state, new, metrics)`.

    Args:
      state: The server state.
      datasets: The sampled clients' datasets.
      client_states: Their states in the order of `datasets`, or None when
        `initial_client_state()` is None.

    Returns:
      The new server state, the clients' new states (a list in the order of
      `datasets`, or None without client states) and the round's metrics.
    """

  def global_model_weights(self, state: Any) -> ModelWeights:
    """The plain global model w^t."""

  def window_model_weights(self, state: Any) -> ModelWeights:
    """The model to evaluate: the window model m^t if any, else w^t."""


def takes_client_ids(runner: Any) -> bool:
  """Whether `runner.run_round` takes client ids instead of datasets."""
  return bool(getattr(runner, 'takes_client_ids', False))


def has_window(runner: Any, state: Any) -> bool:
  """Whether `runner`'s state `state` has a window model to report."""
  method = getattr(runner, 'has_window', None)
  return True if method is None else bool(method(state))


def check_runner(runner: Any) -> None:
  """Raises ValueError unless `runner` has every `RoundRunner` method."""
  for method in RUNNER_METHODS:
    if not callable(getattr(runner, method, None)):
      raise ValueError(
          f'`runner` must be a RoundRunner with a `{method}` method (e.g. a '
          'tff_fedwin.algorithms.runners.LearningProcessRunner), got '
          f'{type(runner).__name__}.'
      )
