"""`tff_fedwin.training.RoundRunner`s for this package's processes.

`LearningProcessRunner` runs any `tff.learning.templates.LearningProcess`
(`build_fed_win`, TFF's builders, with or without a
`WindowedModelAveragingFactory`); `ClientStateRunner` runs
`build_client_state_process` (SCAFFOLD, FedDyn), whose `next` takes and
returns the sampled clients' states.
"""

import collections
from collections.abc import Sequence
import os
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import round_runner
from tff_fedwin.aggregators import window_readout
from tff_fedwin.algorithms import extra_windows
from tff_fedwin.algorithms import resident_state
from tff_fedwin.algorithms import client_state
from tff_fedwin.algorithms.client_state import state_files

ModelWeights = tff.learning.models.ModelWeights


class _ProcessRunner(round_runner.RoundRunner):
  """What both runners share: the process, its `next` (`_next_fn`), and
  what they read alike from a server state: w^t (x), whether it holds a
  window, the extra windows' models (`extra_windows`)."""

  def __init__(
      self, process, extra_window_sizes, server_state_dir, dataset_computation
  ):
    self._process = process
    self._extra = extra_windows.StateExtraWindows(extra_window_sizes)
    self._next = _next_fn(process, server_state_dir, dataset_computation)
    self._takes_client_ids = dataset_computation is not None

  @property
  def process(self) -> tff.templates.IterativeProcess:
    return self._process

  @property
  def takes_client_ids(self) -> bool:
    """Whether `run_round` takes client ids (`dataset_computation` given)."""
    return self._takes_client_ids

  def initialize(self) -> Any:
    """The process's initial server state.

    Raises:
      ValueError: If the state's window cannot hold `extra_window_sizes`.
    """
    state = self._process.initialize()
    self._extra.check_state(state)
    return state

  def global_model_weights(self, state: Any) -> ModelWeights:
    """The plain global model w^t (x), `state.global_model_weights`."""
    return state.global_model_weights

  def has_window(self, state: Any) -> bool:
    """Whether the state holds a window (`window_readout.holds_window`)."""
    return window_readout.holds_window(state)

  def extra_window_models(
      self, state: Any
  ) -> 'collections.OrderedDict[str, ModelWeights]':
    """`window_<W'>` -> the model to evaluate of each extra window size;
    under an IMA window also `aggregate` -> w^t (`extra_windows.aggregate_model`).
    """
    models = self._extra.models(state)
    models.update(extra_windows.aggregate_model(state))
    return models


class LearningProcessRunner(_ProcessRunner):
  """Runs a `tff.learning.templates.LearningProcess` one round at a time.

  The process keeps no client states. The model to evaluate is
  `tff_fedwin.aggregators.window_or_global_model_weights(state)` (numpy, no
  TFF call): the window model when the state holds a window, else w^t.
  """

  def __init__(
      self,
      process: tff.learning.templates.LearningProcess,
      *,
      extra_window_sizes: Sequence[int] = (),
      server_state_dir: Optional[str] = None,
      dataset_computation: Optional[tff.Computation] = None,
  ):
    """Initializes the runner.

    Args:
      process: A `tff.learning.templates.LearningProcess`.
      extra_window_sizes: More window sizes W' to evaluate on the same
        trajectory, read from the window in the state (`extra_windows`;
        each W' <= W with W - W' a multiple of E, checked by `initialize`).
      server_state_dir: If set, the server state stays in files there
        between rounds (`resident_state`; the workers must see the
        directory); `None` sends it as TFF values. The same results.
      dataset_computation: If set, a `(string -> sequence)` TFF computation
        (e.g. `BundleClientData(...).preprocess(fn).dataset_computation`):
        `run_round` then takes the sampled clients' ids, and the workers
        build their datasets with it
        (`tff.simulation.compose_dataset_computation_with_computation`;
        `client_data_bundle`). `None`: `run_round` takes the datasets.

    Raises:
      ValueError: If `process` is not a `LearningProcess` or
        `extra_window_sizes` are not distinct ints >= 1.
      TypeError: If `dataset_computation`'s sequence type is not the one
        `process.next` takes (TFF's composition).
    """
    if not isinstance(process, tff.learning.templates.LearningProcess):
      raise ValueError(
          '`process` must be a tff.learning.templates.LearningProcess, got '
          f'{type(process).__name__}; use ClientStateRunner for SCAFFOLD or '
          'FedDyn.'
      )
    super().__init__(
        process, extra_window_sizes, server_state_dir, dataset_computation
    )

  def initial_client_state(self) -> None:
    """None: a `LearningProcess` keeps no client states."""
    return None

  def run_round(
      self,
      state: Any,
      datasets: Sequence[tf.data.Dataset],
      client_states: Optional[list[Any]] = None,
  ) -> tuple[Any, None, Any]:
    """One `process.next`: `(state, datasets, None) -> (state, None, metrics)`.

    With `dataset_computation`, `datasets` are the clients' ids (str).

    Raises:
      ValueError: If `client_states` is not None.
    """
    if client_states is not None:
      raise ValueError(
          '`client_states` must be None: a LearningProcess keeps '
          'no client states.'
      )
    state, metrics = self._next(state, list(datasets))
    metrics = extra_windows.with_measurements(
        metrics, self._extra.measurements(state)
    )
    return state, None, metrics

  def window_model_weights(self, state: Any) -> ModelWeights:
    """The window model m^t if the state holds a window, else w^t."""
    return window_readout.window_or_global_model_weights(state)

  def set_global_model_weights(self, state: Any, weights: ModelWeights) -> Any:
    """`state` with the global model `weights` (`process.set_model_weights`)."""
    return self._process.set_model_weights(state, weights)


class ClientStateRunner(_ProcessRunner):
  """Runs a `client_state.build_client_state_process` (SCAFFOLD, FedDyn).

  Its `next` is `(server_state, datasets, client_states) -> (server_state,
  client_states, metrics)`; the training loop keeps every client's state
  (SCAFFOLD's c_i, docs/design.md sec. 3) between rounds.
  """

  def __init__(
      self,
      process: tff.templates.IterativeProcess,
      initial_client_state: Any,
      *,
      extra_window_sizes: Sequence[int] = (),
      state_files_dir: Optional[str] = None,
      server_state_dir: Optional[str] = None,
      dataset_computation: Optional[tff.Computation] = None,
  ):
    """Initializes the runner.

    Args:
      process: The `tff.templates.IterativeProcess` of
        `build_client_state_process` (`build_scaffold`, `build_feddyn`).
      initial_client_state: Every client's state before its first round,
        `client_state.initial_client_state(model_fn)`.
      extra_window_sizes: As for `LearningProcessRunner` (the process's
        window keeps every model: any W' < W).
      state_files_dir: For a process built with
        `client_state_transfer='files'` (and only then): the directory for
        the round's client state files, which the workers must see (created
        private to this user). It holds 2 x (clients per round) x (state
        size) once a round has run; the files are overwritten every round.
      server_state_dir: As for `LearningProcessRunner`.
      dataset_computation: As for `LearningProcessRunner`.

    Raises:
      ValueError: If an argument has the wrong type, or `state_files_dir` is
        missing for a `'files'` process or given for a `'values'` one.
    """
    if not isinstance(process, tff.templates.IterativeProcess) or isinstance(
        process, tff.learning.templates.LearningProcess
    ):
      raise ValueError(
          '`process` must be the tff.templates.IterativeProcess of '
          f'build_client_state_process, got {type(process).__name__}.'
      )
    if initial_client_state is None or not tf.nest.flatten(
        initial_client_state
    ):
      raise ValueError(
          '`initial_client_state` must be a ClientState of arrays '
          '(client_state.initial_client_state(model_fn)), got '
          f'{initial_client_state!r}.'
      )
    self._initial_client_state = initial_client_state
    self._state_files_dir = _state_files_dir(process, state_files_dir)
    super().__init__(
        process, extra_window_sizes, server_state_dir, dataset_computation
    )

  def initial_client_state(self) -> client_state.ClientState:
    """Every client's state before its first round (a zero vector)."""
    return self._initial_client_state

  def run_round(
      self,
      state: Any,
      datasets: Sequence[tf.data.Dataset],
      client_states: Sequence[Any],
  ) -> tuple[Any, list[Any], Any]:
    """One round: `(state, datasets, c_i) -> (state, c_i+, metrics)`.

    Args:
      state: The `client_state.ServerState`.
      datasets: The sampled clients' datasets (with `dataset_computation`,
        their ids).
      client_states: Their `ClientState`s, in the order of `datasets`.
    """
    if self._state_files_dir is None:
      state, new_client_states, metrics = self._next(
          state, list(datasets), list(client_states)
      )
    else:
      prefixes = [
          os.path.join(self._state_files_dir, f'client{k}')
          for k in range(len(client_states))
      ]
      state_files.write_inputs(prefixes, client_states)
      state, metrics = self._next(state, list(datasets), prefixes)
      new_client_states = state_files.read_outputs(
          prefixes, self._initial_client_state
      )
    metrics = extra_windows.with_measurements(
        metrics, self._extra.measurements(state)
    )
    return state, list(new_client_states), metrics

  def window_model_weights(self, state: Any) -> ModelWeights:
    """The window model if the state holds a window, else the global model."""
    return client_state.model_weights_to_evaluate(state)

  def set_global_model_weights(
      self, state: client_state.ServerState, weights: ModelWeights
  ) -> client_state.ServerState:
    """`state` with the global model x replaced by `weights` (numpy)."""
    return state._replace(global_model_weights=weights)


# The runner's name from before the per-client-state family.
ScaffoldRunner = ClientStateRunner


def _state_files_dir(process, state_files_dir):
  """The private directory of a `'files'` process's client state files."""
  transfer = getattr(process, 'client_state_transfer', 'values')
  if (transfer == 'files') != (state_files_dir is not None):
    raise ValueError(
        '`state_files_dir` must be given exactly when the process was built '
        "with client_state_transfer='files'; the process's is "
        f'{transfer!r}, `state_files_dir` is {state_files_dir!r}.'
    )
  if state_files_dir is not None:
    os.makedirs(state_files_dir, mode=0o700, exist_ok=True)
  return state_files_dir


def _next_fn(process, server_state_dir, dataset_computation):
  """`(state, *args) -> (state, *results)`: `process.next`, its client
  datasets built by `dataset_computation` from ids if that is set, and with
  `server_state_dir` in its `resident_state` form (the state kept in files).
  """
  next_fn = process.next
  if dataset_computation is not None:
    next_fn = tff.simulation.compose_dataset_computation_with_computation(
        dataset_computation, next_fn
    )
  if server_state_dir is not None:
    return resident_state.ResidentServerState(next_fn, server_state_dir).next
  return lambda state, *args: tuple(next_fn(state, *args))
