"""Server-side SWA (FedSWA, Caldarola et al. 2022): WiMA's comparison.

`SwaRunner` wraps the runner of a process without a window and keeps, next to
its state, the stochastic weight average of the global models taken every c
rounds from a start round on (docs/design.md, "Server-side SWA (WiMA's
comparison)"). It is a read-out only: the clients always start from the plain
global model w^t, and the SWA model is what is evaluated.

The authors' code (github.com/debcaldarola/fedsam): `models/main.py`, `main()`
(the SWA set-up and the update at the end of each cycle) and
`models/servers/fedavg_server.py`, `Server.setup_swa_model` and
`Server.update_swa_model`.
"""

import collections
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin import round_runner
from tff_fedwin.algorithms import extra_windows

ModelWeights = tff.learning.models.ModelWeights

# The round's metrics entry of the SWA model.
SWA_METRICS = 'swa'


class SwaRunnerState(NamedTuple):
  """The server state of a `SwaRunner` (saved with the loop's checkpoints).

  Attributes:
    process: The wrapped runner's server state.
    swa_model: `ModelWeights` of tensors, the running mean of the n global
      models averaged so far (a copy of w^0 while n = 0; never used then).
    swa_count: int64 scalar tensor, n.
    round_num: int64 scalar tensor, the rounds done, t.
  """

  process: Any
  swa_model: ModelWeights
  swa_count: tf.Tensor
  round_num: tf.Tensor


@tf.function
def _running_mean(swa_model: Any, weights: Any, count: tf.Tensor) -> Any:
  """(swa * n + w) / (n + 1) leaf by leaf, in each leaf's dtype.

  The authors' `update_swa_model(alpha = 1 / (n + 1))` computes the same
  mean as swa * (1 - alpha) + w * alpha. A leaf that is not floating point
  takes w.
  """

  def mean(swa, w):
    w = tf.convert_to_tensor(w)
    if not w.dtype.is_floating:
      return w
    swa = tf.cast(swa, w.dtype)
    n = tf.cast(count, w.dtype)
    return (swa * n + w) / (n + 1.0)

  return tf.nest.map_structure(mean, swa_model, weights)


def _as_tensors(weights: ModelWeights) -> ModelWeights:
  """`weights` with each leaf a tensor (a copy the state owns)."""
  return tf.nest.map_structure(
      lambda x: tf.identity(tf.convert_to_tensor(x)), weights
  )


class SwaRunner(round_runner.RoundRunner):
  """Runs `runner`'s process and keeps the SWA model of its global models.

  With the loop's rounds t = 1, 2, ... (w^t: the global model after round t),
  start round t_s and cycle c, after round t the SWA model is updated when
  t > t_s and (t - t_s) mod c = 0:

      swa <- (swa * n + w^t) / (n + 1),   n <- n + 1,

  so it is the plain mean of w^{t_s + c}, w^{t_s + 2c}, ..., up to t.

  Round mapping: the authors' loop counts rounds i = 0, 1, ... with
  `swa_start` S; their round i trains the model our round t = i + 1 trains,
  so t_s = S + 1 is the first round trained with their cyclic client rate
  (`scheduled_client_work.swa_cyclic_client_learning_rate_fn`), and their
  update at rounds i > S with (i - S) mod c = 0 is ours at t = t_s + k c,
  k >= 1. Their default S = int(0.75 R) of R rounds is t_s = int(0.75 R) + 1.

  The authors evaluate a copy of the global model taken at round S (before
  its training) from S until the first update; here `window_model_weights` is
  w^t until n >= 1 (their first update, alpha = 1, overwrites that copy with
  the global model anyway). The round's metrics gain `swa` (`swa_count`: n,
  `swa_updated`: 1 if this round updated it). It keeps `RoundRunner`'s
  `set_global_model_weights` (none): an IMA window cannot wrap it.
  """

  def __init__(self, runner: Any, start_round: int, cycle: int = 1):
    """Initializes the runner.

    Args:
      runner: A `tff_fedwin.training.RoundRunner` (its global model is left as
        the process makes it).
      start_round: t_s >= 1, the loop round the authors' `swa_start` is
        (S + 1, see the class docstring).
      cycle: c >= 1, rounds between two models averaged (the authors'
        `--swa-c`, default 1).

    Raises:
      ValueError: If an argument has the wrong type or value.
    """
    if not isinstance(runner, round_runner.RoundRunner):
      raise ValueError(
          '`runner` must be a tff_fedwin.training.RoundRunner, got '
          f'{type(runner).__name__}.'
      )
    checks.check_int('start_round', start_round, minimum=1)
    checks.check_int('cycle', cycle, minimum=1)
    self._runner = runner
    self._start_round = start_round
    self._cycle = cycle

  @property
  def runner(self) -> Any:
    return self._runner

  @property
  def start_round(self) -> int:
    return self._start_round

  @property
  def cycle(self) -> int:
    return self._cycle

  @property
  def takes_client_ids(self) -> bool:
    """Whether the wrapped runner's `run_round` takes client ids."""
    return self._runner.takes_client_ids

  def updates_at(self, round_num: int) -> bool:
    """Whether round t = `round_num` adds w^t to the SWA model."""
    since = round_num - self._start_round
    return since > 0 and since % self._cycle == 0

  def initialize(self) -> SwaRunnerState:
    """The wrapped runner's initial state, n = 0 and t = 0."""
    state = self._runner.initialize()
    weights = self._runner.global_model_weights(state)
    return SwaRunnerState(
        process=state,
        swa_model=_as_tensors(weights),
        swa_count=tf.constant(0, tf.int64),
        round_num=tf.constant(0, tf.int64),
    )

  def initial_client_state(self) -> Optional[Any]:
    return self._runner.initial_client_state()

  def open_files(
      self, checkpoint_dir: str, round_num: Optional[int], state: Any
  ) -> Optional[Any]:
    """The wrapped runner's files; SWA keeps none (all in the state)."""
    return self._runner.open_files(checkpoint_dir, round_num, state.process)

  def run_round(
      self,
      state: SwaRunnerState,
      datasets: Sequence[Any],
      client_states: Optional[list[Any]],
  ) -> tuple[SwaRunnerState, Optional[list[Any]], Any]:
    """One round of the wrapped runner, then the SWA update if due."""
    process_state, new_client_states, metrics = self._runner.run_round(
        state.process, datasets, client_states
    )
    round_num = int(state.round_num) + 1
    swa_model, swa_count = state.swa_model, state.swa_count
    updated = self.updates_at(round_num)
    if updated:
      weights = self._runner.global_model_weights(process_state)
      swa_model = _running_mean(swa_model, weights, swa_count)
      swa_count = swa_count + 1
    measurements = {
        SWA_METRICS: collections.OrderedDict(
            swa_count=np.int64(swa_count), swa_updated=np.int64(updated)
        )
    }
    new_state = SwaRunnerState(
        process_state,
        swa_model,
        tf.constant(int(swa_count), tf.int64),
        tf.constant(round_num, tf.int64),
    )
    return (
        new_state,
        new_client_states,
        extra_windows.with_measurements(metrics, measurements),
    )

  def global_model_weights(self, state: SwaRunnerState) -> ModelWeights:
    """The wrapped process's global model w^t (never the SWA model)."""
    return self._runner.global_model_weights(state.process)

  def window_model_weights(self, state: SwaRunnerState) -> ModelWeights:
    """The SWA model once n >= 1, else w^t."""
    if self.swa_active(state):
      return state.swa_model
    return self.global_model_weights(state)

  def swa_active(self, state: SwaRunnerState) -> bool:
    """True once the SWA model holds a model (n >= 1)."""
    return int(state.swa_count) >= 1

  def has_window(self, state: SwaRunnerState) -> bool:
    """True: the run reports the SWA model as its `window/` figures.

    The loop asks this of the state it starts from (a fresh run's has
    n = 0), to decide whether the run has a window model at all; as with a
    `ProgramWindowRunner` whose window is not yet active, the figures repeat
    w^t's until n >= 1 (`swa_active`).
    """
    del state  # Unused.
    return True
