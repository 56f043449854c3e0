"""The window's public names in one module (WiMA, IMA; docs/design.md sec. 1).

The code lives in `window_state` (types), `window_math` (arithmetic and
checks), `window_factory` (the aggregation factory) and `window_readout`
(numpy read-out); this module re-exports it for existing imports.
"""

from typing import Any

from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators.window_factory import WindowedModelAveragingFactory
from tff_fedwin.aggregators.window_math import check_float_structure
from tff_fedwin.aggregators.window_math import MODES
from tff_fedwin.aggregators.window_math import num_slots
from tff_fedwin.aggregators.window_math import window_is_active
from tff_fedwin.aggregators.window_math import window_mean
from tff_fedwin.aggregators.window_math import window_measurements
from tff_fedwin.aggregators.window_math import window_push
from tff_fedwin.aggregators.window_math import window_step
from tff_fedwin.aggregators.window_readout import find_window_states
from tff_fedwin.aggregators.window_readout import holds_window
from tff_fedwin.aggregators.window_readout import window_model_weights
from tff_fedwin.aggregators.window_readout import window_offset_numpy
from tff_fedwin.aggregators.window_readout import window_or_global_model_weights
from tff_fedwin.aggregators.window_state import WindowAggregatorState
from tff_fedwin.aggregators.window_state import WindowBuffer


def validate_window_args(
    window_size: Any, mode: Any, start_round: Any, read_every: Any
) -> None:
  """Positional form of `window_math.check_window_args` (older callers)."""
  window_math.check_window_args(
      window_size=window_size,
      mode=mode,
      start_round=start_round,
      read_every=read_every,
  )


def initial_window(
    model_like: Any,
    window_size: int,
    mode: str,
    start_round: int,
    read_every: int,
) -> WindowBuffer:
  """Positional form of `window_math.initial_window` (older callers)."""
  return window_math.initial_window(
      model_like,
      window_size=window_size,
      mode=mode,
      start_round=start_round,
      read_every=read_every,
  )
