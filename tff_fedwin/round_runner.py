"""The interface between the training loop and a federated process.

`tff_fedwin.training.run_training` drives any process through a `RoundRunner`,
one abstract class that declares every method the loop may call: five a runner
must define and five with defaults a runner overrides when it has the feature.
The runners of this package's algorithms (`tff_fedwin.algorithms.runners`)
subclass it; it lives at the top of the package so that `algorithms` need not
import `training` (docs/design.md, "Target import graph").
"""

import abc
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import tensorflow_federated as tff

ModelWeights = tff.learning.models.ModelWeights


class RoundRunner(abc.ABC):
  """What `run_training` needs from a process, one round at a time.

  The loop owns the clients' states: when `initial_client_state()` is not
  None it keeps a `tff_fedwin.training.ClientStateStore` made from it, passes
  the sampled clients' states to `run_round` and stores the returned ones.

  A subclass defines the five abstract methods; the others have the default
  of a process without that feature (no files beside the checkpoints, one
  window or none, datasets built by the driver).
  """

  @abc.abstractmethod
  def initialize(self) -> Any:
    """The initial server state."""

  @abc.abstractmethod
  def initial_client_state(self) -> Optional[Any]:
    """Every client's state before its first round; None: no client states."""

  @abc.abstractmethod
  def run_round(
      self,
      state: Any,
      datasets: Sequence[Any],
      client_states: Optional[list[Any]],
  ) -> tuple[Any, Optional[list[Any]], Any]:
    """One round: `(state, datasets, client_states) -> (state, new, metrics)`.

    Args:
      state: The server state.
      datasets: The sampled clients' `tf.data.Dataset`s, or their ids when
        `takes_client_ids` is True.
      client_states: Their states in the order of `datasets`, or None when
        `initial_client_state()` is None.

    Returns:
      The new server state, the clients' new states (a list in the order of
      `datasets`, or None without client states) and the round's metrics.
    """

  @abc.abstractmethod
  def global_model_weights(self, state: Any) -> ModelWeights:
    """The plain global model w^t."""

  @abc.abstractmethod
  def window_model_weights(self, state: Any) -> ModelWeights:
    """The model to evaluate: the window model m^t if any, else w^t."""

  @property
  def takes_client_ids(self) -> bool:
    """Whether `run_round` takes the sampled clients' ids, not datasets.

    True for a runner whose workers build the clients' datasets themselves
    (e.g. a `LearningProcessRunner` with a `dataset_computation`).
    """
    return False

  def has_window(self, state: Any) -> bool:
    """Whether `window_model_weights(state)` is a window model at all.

    False: it is w^t, and the console and the printed summary leave the
    `window/` figures out (`metrics.csv` keeps its columns).
    """
    del state
    return True

  def extra_window_models(self, state: Any) -> Mapping[str, ModelWeights]:
    """Further windows on the trajectory: name (e.g. `window_50`) -> model.

    The loop evaluates each with the window and global models and writes
    `<name>/<metric>` columns (`training.metrics.evaluate_models`).
    """
    del state
    return {}

  def open_files(
      self, checkpoint_dir: str, round_num: Optional[int], state: Any
  ) -> Optional[Any]:
    """The files this runner keeps next to the checkpoints, or None.

    Called once before the first round (`round_num`: the checkpoint resumed
    from, None for a fresh run). The returned object's `prepare_checkpoint`,
    `finish_checkpoint` and `close` run with every checkpoint, after the
    client states' (`tff_fedwin.training.checkpoint_steps.CheckpointSteps`);
    e.g. `tff_fedwin.algorithms.ProgramWindowRunner`'s window models.
    """
    del checkpoint_dir, round_num, state
    return None

  def set_global_model_weights(self, state: Any, weights: ModelWeights) -> Any:
    """`state` with its global model replaced by `weights`.

    Needed by a window the program keeps in broadcast mode (IMA); a runner
    that cannot replace its model keeps this default.

    Raises:
      NotImplementedError: Always, in this default.
    """
    del state, weights
    raise NotImplementedError(
        f'{type(self).__name__} cannot replace its global model.'
    )


class ForwardingRunner(RoundRunner):
  """A `RoundRunner` that forwards every method to the runner it wraps.

  Subclass it to watch or change some calls of another runner (e.g. to
  record each round) and override only those.
  """

  def __init__(self, runner: RoundRunner):
    if not isinstance(runner, RoundRunner):
      raise ValueError(
          '`runner` must be a tff_fedwin.training.RoundRunner, got '
          f'{type(runner).__name__}.'
      )
    self._inner = runner

  @property
  def inner(self) -> RoundRunner:
    """The wrapped runner."""
    return self._inner

  def initialize(self) -> Any:
    return self._inner.initialize()

  def initial_client_state(self) -> Optional[Any]:
    return self._inner.initial_client_state()

  def run_round(self, state, datasets, client_states):
    return self._inner.run_round(state, datasets, client_states)

  def global_model_weights(self, state: Any) -> ModelWeights:
    return self._inner.global_model_weights(state)

  def window_model_weights(self, state: Any) -> ModelWeights:
    return self._inner.window_model_weights(state)

  @property
  def takes_client_ids(self) -> bool:
    return self._inner.takes_client_ids

  def has_window(self, state: Any) -> bool:
    return self._inner.has_window(state)

  def extra_window_models(self, state: Any) -> Mapping[str, ModelWeights]:
    return self._inner.extra_window_models(state)

  def open_files(
      self, checkpoint_dir: str, round_num: Optional[int], state: Any
  ) -> Optional[Any]:
    return self._inner.open_files(checkpoint_dir, round_num, state)

  def set_global_model_weights(self, state: Any, weights: ModelWeights) -> Any:
    return self._inner.set_global_model_weights(state, weights)


def sets_global_model_weights(runner: RoundRunner) -> bool:
  """Whether `runner` can replace its global model (overrides the default)."""
  if isinstance(runner, ForwardingRunner):
    return sets_global_model_weights(runner.inner)
  return (
      type(runner).set_global_model_weights
      is not RoundRunner.set_global_model_weights
  )
