"""Learning-process builders: the FedAvg family with the window, the
per-client-state family (SCAFFOLD, FedDyn), Mime Lite; the client-training
core; round runners for `tff_fedwin.training`.
"""

from tff_fedwin.aggregators.window_finalizer import build_window_finalizer
from tff_fedwin.algorithms.adabest import AdaBest
from tff_fedwin.algorithms.adabest import build_adabest
from tff_fedwin.algorithms.client_state import build_client_state_process
from tff_fedwin.algorithms.client_state import ClientStateAlgorithm
from tff_fedwin.algorithms.client_training import CLIENT_LOSSES
from tff_fedwin.algorithms.client_work import build_client_work
from tff_fedwin.algorithms.client_work import build_wsm_client_work
from tff_fedwin.algorithms.fed_win import build_fed_win
from tff_fedwin.algorithms.fedacg import build_fedacg
from tff_fedwin.algorithms.fedacg import FedACG
from tff_fedwin.algorithms.fedcm import build_fedcm
from tff_fedwin.algorithms.fedcm import FedCM
from tff_fedwin.algorithms.feddyn import build_feddyn
from tff_fedwin.algorithms.feddyn import FedDyn
from tff_fedwin.algorithms.fedgma import build_fedgma
from tff_fedwin.algorithms.fedgma import FedGma
from tff_fedwin.algorithms.fedfa import build_fedfa
from tff_fedwin.algorithms.fedfa import FedFa
from tff_fedwin.algorithms.fednova import FedNovaFactory
from tff_fedwin.algorithms.fednova import build_fednova
from tff_fedwin.algorithms.mime import build_mime
from tff_fedwin.algorithms.mime import Mime
from tff_fedwin.algorithms.mime_lite import build_mime_lite_with_window
from tff_fedwin.algorithms.multi_round import build_multi_round_process
from tff_fedwin.algorithms.partial_window_runner import PartialWindowRunner
from tff_fedwin.algorithms.program_window_runner import ProgramWindowRunner
from tff_fedwin.algorithms.runners import LearningProcessRunner
from tff_fedwin.algorithms.runners import ClientStateRunner
from tff_fedwin.algorithms.runners import ScaffoldRunner
from tff_fedwin.algorithms.scaffold import build_scaffold
from tff_fedwin.algorithms.scaffold import initial_client_state
from tff_fedwin.algorithms.scaffold import Scaffold
from tff_fedwin.algorithms.scheduled_client_work import build_scheduled_client_work
from tff_fedwin.algorithms.scheduled_client_work import exponential_client_learning_rate_fn
from tff_fedwin.algorithms.scheduled_client_work import ima_client_learning_rate_fn
from tff_fedwin.algorithms.scheduled_client_work import ima_constant_client_learning_rate_fn
from tff_fedwin.algorithms.scheduled_client_work import ima_cyclic_client_learning_rate_fn
from tff_fedwin.algorithms.scheduled_client_work import swa_cyclic_client_learning_rate_fn
from tff_fedwin.algorithms.swa_runner import SwaRunner
from tff_fedwin.algorithms.sharpness import Sharpness
from tff_fedwin.algorithms.sharpness import build_sharpness
