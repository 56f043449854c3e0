"""The composition root: an experiment from its configuration to its summary."""

from tff_fedwin.experiments.config import ALGORITHMS
from tff_fedwin.experiments.config import CLIENT_DATA_TRANSFERS
from tff_fedwin.experiments.config import CLIENT_STATE_TRANSFERS
from tff_fedwin.experiments.config import CLIENT_STATES
from tff_fedwin.experiments.config import CLIENT_LOSSES
from tff_fedwin.experiments.config import EVAL_SPLITS
from tff_fedwin.experiments.config import ExperimentConfig
from tff_fedwin.experiments.config import InputDataError
from tff_fedwin.experiments.config import LR_SCHEDULES
from tff_fedwin.experiments.config import parse_window_sizes
from tff_fedwin.experiments.config import SERVER_STATE_TRANSFERS
from tff_fedwin.experiments.config import TASKS
from tff_fedwin.experiments.config import USER_ERRORS
from tff_fedwin.experiments.config import validate_config
from tff_fedwin.experiments.config import WINDOW_LOCATIONS
from tff_fedwin.experiments.config import WINDOW_MODES
from tff_fedwin.experiments.config import WORKER_BINDS
from tff_fedwin.experiments.context import execution_context
from tff_fedwin.experiments.context import parse_workers
from tff_fedwin.experiments.registry import build_runner
from tff_fedwin.experiments.registry import RUNNER_BUILDERS
from tff_fedwin.experiments.run import run_experiment
from tff_fedwin.experiments.run_record import MAY_DIFFER
from tff_fedwin.experiments.run_record import RunConfigMismatchError
from tff_fedwin.experiments.run_record import WorkerLostError
from tff_fedwin.training.run_lock import RunDirectoryLockedError
