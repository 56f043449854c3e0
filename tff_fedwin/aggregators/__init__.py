"""Window-based model averaging as a composable `tff.aggregators` factory."""

from tff_fedwin.aggregators.program_window import ProgramWindow
from tff_fedwin.aggregators.program_window import ProgramWindowState
from tff_fedwin.aggregators.round_model_files import MissingWindowModelsError
from tff_fedwin.aggregators.round_model_files import WindowFilesError
from tff_fedwin.aggregators.window_factory import WindowedModelAveragingFactory
from tff_fedwin.aggregators.window_readout import holds_window
from tff_fedwin.aggregators.window_readout import window_model_weights
from tff_fedwin.aggregators.window_readout import window_or_global_model_weights
from tff_fedwin.aggregators.window_state import WindowAggregatorState
from tff_fedwin.aggregators.window_state import WindowBuffer
