"""Extra window sizes on one trajectory, read from the window in the state.

A window in the process state (`build_fed_win`'s finalizer, SCAFFOLD's, a
`tff_fedwin.aggregators.WindowedModelAveragingFactory` in TFF's builders)
keeps the last W models in ceil(W/E) segment sums. Every W' <= W with W - W'
a multiple of E is a whole number of the newest segments, so the windows of
those sizes cost no state and no round time: they are read out in numpy when
the loop evaluates (docs/design.md sec. 1.11). `StateExtraWindows` does that
for the runners of `runners.py`; `ProgramWindowRunner` keeps its extra sizes
in its own running sums instead.
"""

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow_federated as tff

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators import window_readout

ModelWeights = tff.learning.models.ModelWeights


# The eval-column prefix of the round's raw aggregate w^t in 'broadcast' mode.
AGGREGATE_NAME = 'aggregate'


def extra_window_name(window_size: int) -> str:
  """The metrics and eval-column prefix of an extra window: `window_<W>`."""
  return f'window_{window_size}'


def with_measurements(metrics: Any, measurements: Mapping[str, Any]) -> Any:
  """The round's `metrics` with `measurements` added as top-level entries."""
  if not measurements:
    return metrics
  if isinstance(metrics, Mapping):
    return collections.OrderedDict(metrics, **measurements)
  return collections.OrderedDict(process=metrics, **measurements)


class StateExtraWindows:
  """More window sizes W' read from the one window in a process state.

  Each W' is evaluated only (WiMA Eq. 4 with W', active at rounds
  t >= max(W', start_round) with t % E == 0, in either mode); it never changes
  what the clients receive.
  """

  def __init__(self, window_sizes: Sequence[int] = ()):
    """Initializes the reader.

    Args:
      window_sizes: Distinct ints >= 1; each must be readable from the
        state's window (`check_state`).

    Raises:
      ValueError: If `window_sizes` are not distinct ints >= 1.
    """
    self.window_sizes = window_math.checked_extra_window_sizes(window_sizes)

  def check_state(self, state: Any) -> None:
    """Raises ValueError unless `state`'s window holds every extra size.

    The message names the size and lists the readable ones
    (`tff_fedwin.aggregators.window_readout.readable_window_sizes`).
    """
    if not self.window_sizes:
      return
    window = window_readout.state_window(state)
    window_math.checked_extra_window_sizes(
        self.window_sizes, int(window.window_size)
    )
    for size in self.window_sizes:
      window_readout.check_readable_window_size(window, size)

  def models(self, state: Any) -> 'collections.OrderedDict[str, ModelWeights]':
    """`window_<W'>` -> m^t of that size when active, else the global model."""
    return collections.OrderedDict(
        (
            extra_window_name(size),
            window_readout.window_model_weights(state, window_size=size),
        )
        for size in self.window_sizes
    )

  def measurements(self, state: Any) -> collections.OrderedDict:
    """`window_<W'>` -> fill, activity and ||m^t - w^t||_2 of each size.

    w^t is the model the round aggregated. In `'broadcast'` mode (E = 1)
    the state's global model is then the sent m^t, so w^t is read as the
    window of one model (the newest slot), as the program window measures.
    """
    if not self.window_sizes:
      return collections.OrderedDict()
    window = window_readout.state_window(state)
    model = state.global_model_weights.trainable
    if bool(window.broadcast) and int(window.window_size) > 1:
      model = window_readout.window_model_weights(state, window_size=1)
      model = model.trainable
    return collections.OrderedDict(
        (
            name,
            window_math.window_measurements_numpy(
                num_models=int(window.num_models),
                window_size=size,
                active=window_readout.reads_mean_numpy(window, size),
                window_model=weights.trainable,
                model=model,
            ),
        )
        for size, (name, weights) in zip(
            self.window_sizes, self.models(state).items()
        )
    )


def aggregate_model(
    state: Any,
) -> 'collections.OrderedDict[str, ModelWeights]':
  """`aggregate` -> w^t, the round's raw aggregate, under an IMA window.

  In `'broadcast'` mode the state's global model is the window model m^t
  sent to the clients from the first active round; the aggregate w^t the
  round produced (after the server optimizer) is the newest model in the
  window, read as its window of one model (E = 1 in that mode; before the
  window is active it is the global model). Empty for a state without a
  window in `'broadcast'` mode, whose global model already is w^t.
  """
  if not window_readout.holds_window(state):
    return collections.OrderedDict()
  window = window_readout.state_window(state)
  if not bool(window.broadcast):
    return collections.OrderedDict()
  return collections.OrderedDict(
      [(AGGREGATE_NAME, window_readout.window_model_weights(state, 1))]
  )
