"""Learning-process builders: the FedAvg family with the window, SCAFFOLD,
Mime Lite; the client-training core; round runners for `tff_fedwin.training`.
"""

from tff_fedwin.aggregators.window_finalizer import build_window_finalizer
from tff_fedwin.algorithms.client_training import CLIENT_LOSSES
from tff_fedwin.algorithms.client_work import build_client_work
from tff_fedwin.algorithms.fed_win import build_fed_win
from tff_fedwin.algorithms.mime_lite import build_mime_lite_with_window
from tff_fedwin.algorithms.multi_round import build_multi_round_process
from tff_fedwin.algorithms.program_window_runner import ProgramWindowRunner
from tff_fedwin.algorithms.runners import LearningProcessRunner
from tff_fedwin.algorithms.runners import ScaffoldRunner
from tff_fedwin.algorithms.scaffold import build_scaffold
from tff_fedwin.algorithms.scaffold import initial_client_state
from tff_fedwin.algorithms.scheduled_client_work import build_scheduled_client_work
from tff_fedwin.algorithms.scheduled_client_work import exponential_client_learning_rate_fn
from tff_fedwin.algorithms.scheduled_client_work import ima_client_learning_rate_fn
from tff_fedwin.algorithms.wsm_client_work import build_wsm_client_work
