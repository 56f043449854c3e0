"""The typed server state of the model window (WiMA, IMA).

`WindowBuffer` is the window itself, kept by both the aggregation factory and
the post-optimizer finalizer; `WindowAggregatorState` is the state of
`WindowedModelAveragingFactory`'s aggregation process (docs/design.md sec. 1).
"""

from typing import Any, NamedTuple


class WindowBuffer(NamedTuple):
  """The window of the last W models, kept as K = ceil(W / E) segment sums.

  Each slot holds the sum of the models of one segment of rounds; segments
  are laid out so that at every read round (t % E == 0) the slots hold exactly
  w^{t-W+1} .. w^t (docs/design.md sec. 1).

  Attributes:
    slots: A structure like the model; each tensor has a leading axis of size
      K: the sums of the models in each segment.
    window_sum: A structure like the model: the sum of all slots.
    cursor: int32 scalar, the slot accumulating the current segment.
    num_models: int32 scalar, the number of models pushed (= rounds done).
    window_size: int32 scalar W.
    read_every: int32 scalar E.
    start_round: int32 scalar: the window is active from
      max(W, start_round) on.
    broadcast: bool scalar, True in `'broadcast'` (IMA) mode.
  """

  slots: Any
  window_sum: Any
  cursor: Any
  num_models: Any
  window_size: Any
  read_every: Any
  start_round: Any
  broadcast: Any


class WindowAggregatorState(NamedTuple):
  """State of `WindowedModelAveragingFactory`'s aggregation process.

  Attributes:
    inner: The state of the inner aggregation process.
    window: A `WindowBuffer` of model positions relative to w^0.
    position: The position of the current global model relative to w^0
      (the sum of minus the emitted aggregates): w^t in evaluate mode, the
      model sent to clients (m^t when active) in broadcast mode.
  """

  inner: Any
  window: WindowBuffer
  position: Any
