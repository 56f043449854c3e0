"""Window-based model averaging as a composable `tff.aggregators` factory."""

from tff_fedwin.aggregators.window import WindowAggregatorState
from tff_fedwin.aggregators.window import WindowBuffer
from tff_fedwin.aggregators.window import window_model_weights
from tff_fedwin.aggregators.window import WindowedModelAveragingFactory
