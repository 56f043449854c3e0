"""The errors a user can act on from their message alone.

Scripts print them as one line (see scripts/run_experiment.py).
"""

from tff_fedwin import runtime
from tff_fedwin.algorithms import program_window_runner
from tff_fedwin.experiments import config
from tff_fedwin.experiments import run_record
from tff_fedwin.runtime import shared_dir
from tff_fedwin.tasks import registry
from tff_fedwin.training import checkpoints
from tff_fedwin.training import client_state_spec
from tff_fedwin.training import divergence
from tff_fedwin.training import run_lock

USER_ERRORS = (
    config.InputDataError,
    registry.DataUnavailableError,
    runtime.WorkerConfinementError,
    divergence.TrainingDivergedError,
    client_state_spec.ClientStatesError,
    program_window_runner.WindowFilesError,
    program_window_runner.WindowSizesMismatchError,
    checkpoints.CheckpointMismatchError,
    run_lock.RunDirectoryLockedError,
    run_record.RunConfigMismatchError,
    run_record.WorkerLostError,
    shared_dir.SharedDirError,
)
