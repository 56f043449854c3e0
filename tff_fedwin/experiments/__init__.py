"""The composition root: an experiment from its configuration to its summary.

The configuration and its checks (`config`, `worker_flags`, and `data_files`
on first use) import without TensorFlow, so `scripts/run_experiment.py`
refuses a bad flag or data file before the heavy imports; the names that need TensorFlow and TFF (`run_experiment`, the runner
registry, the execution context, ...) are imported on first use
(PEP 562 `__getattr__`).
"""

import typing

from tff_fedwin import lazy_names
from tff_fedwin.experiments.config import ALGORITHMS
from tff_fedwin.experiments.config import CLIENT_DATA_TRANSFERS
from tff_fedwin.experiments.config import CLIENT_LOSSES
from tff_fedwin.experiments.config import CLIENT_STATE_TRANSFERS
from tff_fedwin.experiments.config import CLIENT_STATES
from tff_fedwin.experiments.config import EVAL_SPLITS
from tff_fedwin.experiments.config import ExperimentConfig
from tff_fedwin.experiments.config import InputDataError
from tff_fedwin.experiments.config import LEAF_KINDS
from tff_fedwin.experiments.config import LR_SCHEDULES
from tff_fedwin.experiments.config import MODELS
from tff_fedwin.experiments.config import parse_window_sizes
from tff_fedwin.experiments.config import SERVER_STATE_TRANSFERS
from tff_fedwin.experiments.config import TASKS
from tff_fedwin.experiments.config import TEXT_LEVELS
from tff_fedwin.experiments.config import TEXT_MODELS
from tff_fedwin.experiments.config import TEXT_TOKENIZERS
from tff_fedwin.experiments.config import validate_config
from tff_fedwin.experiments.config import WINDOW_LOCATIONS
from tff_fedwin.experiments.config import WINDOW_MODES
from tff_fedwin.experiments.config import WINDOW_PARTS
from tff_fedwin.experiments.config import WORKER_BINDS
from tff_fedwin.experiments.worker_flags import parse_workers

if typing.TYPE_CHECKING:  # The names imported on first use, for type checkers.
  from tff_fedwin.experiments.context import execution_context
  from tff_fedwin.experiments.data_files import read_data_files
  from tff_fedwin.experiments.registry import build_runner
  from tff_fedwin.experiments.registry import RUNNER_BUILDERS
  from tff_fedwin.experiments.run import run_experiment
  from tff_fedwin.experiments.run_record import MAY_DIFFER
  from tff_fedwin.experiments.run_record import RunConfigMismatchError
  from tff_fedwin.experiments.run_record import WorkerLostError
  from tff_fedwin.training.run_lock import RunDirectoryLockedError
  from tff_fedwin.training.run_lock import TransferDirectoryLockedError

# name -> the module that defines it; imported on first use (TensorFlow and
# TFF; numpy for `read_data_files`, so a bad flag needs neither).
_HEAVY = {
    'read_data_files': 'tff_fedwin.experiments.data_files',
    'execution_context': 'tff_fedwin.experiments.context',
    'build_runner': 'tff_fedwin.experiments.registry',
    'RUNNER_BUILDERS': 'tff_fedwin.experiments.registry',
    'run_experiment': 'tff_fedwin.experiments.run',
    'MAY_DIFFER': 'tff_fedwin.experiments.run_record',
    'RunConfigMismatchError': 'tff_fedwin.experiments.run_record',
    'WorkerLostError': 'tff_fedwin.experiments.run_record',
    'RunDirectoryLockedError': 'tff_fedwin.training.run_lock',
    'TransferDirectoryLockedError': 'tff_fedwin.training.run_lock',
}


__getattr__, __dir__ = lazy_names.module_hooks(__name__, _HEAVY, globals())
