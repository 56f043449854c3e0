"""Tests for tff_fedwin.errors: one hierarchy for the package's errors.

Every exception class the package defines is found by importing each module
and is placed by hand below (what the user can do about it), so a new class
fails here until someone decides whether it is printed as one line.
"""

import importlib
import inspect
import pkgutil

import pytest

import tff_fedwin
from tff_fedwin import errors

# Every exception class of the package -> the base it must have. A
# `UserError` is printed by the scripts as one line; the others keep their
# traceback (programming errors, or failures that become a `UserError`).
PLACES = {
    'aggregators.program_window.WindowSizesMismatchError': (
        errors.RunDirectoryError
    ),
    'aggregators.round_model_files.MissingWindowModelsError': (
        errors.RunDirectoryError
    ),
    'aggregators.round_model_files.WindowFilesError': errors.RunDirectoryError,
    'data.leaf_cache_trust.LeafCacheError': errors.EnvironmentProblemError,
    'data.leaf_kinds.LeafDataError': errors.InputError,
    'data.text_records.TextDataError': errors.InputError,
    'errors.EnvironmentProblemError': errors.UserError,
    'errors.InputError': errors.UserError,
    'errors.RunDirectoryError': errors.UserError,
    'errors.TrainingStoppedError': errors.UserError,
    'errors.UserError': Exception,
    'errors.WorkerCrashedError': errors.WorkerError,
    'errors.WorkerError': RuntimeError,
    'errors.WorkerLostError': errors.UserError,
    'errors.WorkerUnavailableError': errors.WorkerError,
    'experiments.config.InputDataError': errors.InputError,
    'experiments.run_record.RunConfigMismatchError': errors.RunDirectoryError,
    'reporting.plots.MetricNotFoundError': errors.InputError,
    'runtime.loopback.WorkerConfinementError': errors.EnvironmentProblemError,
    'runtime.shared_dir.SharedDirError': errors.EnvironmentProblemError,
    'tasks.image_models.ImageModelError': errors.InputError,
    'tasks.per_client.PerClientEvaluationError': errors.InputError,
    'tasks.tff_baselines.DataUnavailableError': (
        errors.EnvironmentProblemError
    ),
    'training.checkpoints.CheckpointMismatchError': errors.RunDirectoryError,
    'training.checkpoints.DiskFullError': errors.EnvironmentProblemError,
    'training.checkpoints.NoIntactCheckpointError': errors.RunDirectoryError,
    'training.client_state_spec.ClientStatesError': errors.RunDirectoryError,
    'training.client_state_spec.DamagedClientStatesError': (
        errors.RunDirectoryError
    ),
    'training.client_state_spec.MissingClientStatesError': (
        errors.RunDirectoryError
    ),
    'training.divergence.TrainingDivergedError': errors.TrainingStoppedError,
    'training.metrics_rows.RowsFileError': errors.RunDirectoryError,
    'training.run_lock.RunDirectoryLockedError': errors.RunDirectoryError,
    'training.run_lock.TransferDirectoryLockedError': (
        errors.RunDirectoryError
    ),
}
# Worker failures the runtime raises: not the user's to fix as they are
# (the run turns them into `WorkerLostError`).
NOT_USER_ERRORS = {
    'errors.WorkerError',
    'errors.WorkerUnavailableError',
    'errors.WorkerCrashedError',
}


def _defined_exception_classes():
  """`module.Class` (package-relative) -> class, of every module's own."""
  found = {}
  for info in pkgutil.walk_packages(
      tff_fedwin.__path__, tff_fedwin.__name__ + '.'
  ):
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
      if (
          inspect.isclass(value)
          and issubclass(value, BaseException)
          and value.__module__ == info.name
      ):
        found[f'{info.name[len("tff_fedwin."):]}.{name}'] = value
  return found


@pytest.fixture(scope='module')
def defined():
  return _defined_exception_classes()


def test_every_exception_class_is_placed(defined):
  assert sorted(defined) == sorted(PLACES)


@pytest.mark.parametrize('name', sorted(PLACES))
def test_class_is_under_its_base(defined, name):
  cls = defined[name]
  assert issubclass(cls, PLACES[name])
  assert issubclass(cls, errors.UserError) is (name not in NOT_USER_ERRORS)


@pytest.mark.parametrize(
    'name, builtin',
    [
        ('experiments.config.InputDataError', ValueError),
        ('training.checkpoints.CheckpointMismatchError', ValueError),
        ('training.run_lock.RunDirectoryLockedError', RuntimeError),
        ('training.run_lock.TransferDirectoryLockedError', RuntimeError),
        ('runtime.shared_dir.SharedDirError', RuntimeError),
        ('errors.WorkerLostError', RuntimeError),
    ],
)
def test_classes_keep_their_builtin_base(defined, name, builtin):
  # `except ValueError` / `except RuntimeError` written before still match.
  assert issubclass(defined[name], builtin)


def test_disk_full_is_no_checkpoint_mismatch(defined):
  # It subclassed CheckpointMismatchError only to be printed as one line.
  assert not issubclass(
      defined['training.checkpoints.DiskFullError'],
      defined['training.checkpoints.CheckpointMismatchError'],
  )


def test_the_worker_errors_are_one_family(defined):
  from tff_fedwin.experiments import run_record
  from tff_fedwin.runtime import worker_stub
  from tff_fedwin.runtime import workers

  assert worker_stub.WorkerUnavailableError is errors.WorkerUnavailableError
  assert workers.WorkerCrashedError is errors.WorkerCrashedError
  assert run_record.WorkerLostError is errors.WorkerLostError
  lost = errors.WorkerLostError('gone', 'localhost:1', 4)
  assert (str(lost), lost.address, lost.resume_round) == (
      'gone',
      'localhost:1',
      4,
  )


def test_errors_module_imports_nothing():
  # The scripts test an error's class before TensorFlow is imported.
  with open(errors.__file__) as f:
    source = f.read()
  assert 'import ' not in source.split('"""', 2)[2]
