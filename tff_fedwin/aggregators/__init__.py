"""Window-based model averaging as a composable `tff.aggregators` factory."""

from tff_fedwin.aggregators.window_factory import WindowedModelAveragingFactory
from tff_fedwin.aggregators.window_readout import holds_window
from tff_fedwin.aggregators.window_readout import window_model_weights
from tff_fedwin.aggregators.window_readout import window_or_global_model_weights
from tff_fedwin.aggregators.window_state import WindowAggregatorState
from tff_fedwin.aggregators.window_state import WindowBuffer
