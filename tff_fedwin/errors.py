"""The package's errors, by what the user can do about them.

`UserError` is the one base of every error a user can fix from its message
alone: the scripts print it as one line (`program: message`) and exit 1
(`--verbosity` keeps the traceback), keyed on this class. Beneath it, by
what went wrong:

* `InputError`: a flag, argument or data file that does not fit (the message
  names it and what is allowed).
* `RunDirectoryError`: the run directory refuses the run: another process
  holds it, it was started with other flags, its checkpoints or saved states
  cannot be used.
* `EnvironmentProblemError`: the machine or the network: a full disk, data
  that cannot be downloaded, a shared directory a worker cannot use, a
  worker that cannot be confined.
* `TrainingStoppedError`: the training itself stopped (a diverged loss).
* `WorkerLostError`: a TFF worker died or became unreachable during a run.

`WorkerError` is the base of the three ways a TFF worker fails; the two the
runtime raises (`WorkerUnavailableError`, `WorkerCrashedError`) become a
`WorkerLostError` (a `UserError`, with the round a rerun resumes from) in
`experiments.run_record.worker_lost`. Each class keeps the builtin base it had
(`ValueError`, `RuntimeError`) so existing `except` clauses still match.

This module imports nothing: the scripts check an error's class before
TensorFlow is loaded.
"""


class UserError(Exception):
  """The user can fix this from the message alone: printed as one line."""


class InputError(UserError, ValueError):
  """A flag, argument or data file that does not fit; the message names it."""


class RunDirectoryError(UserError):
  """The run directory, its checkpoints or saved states refuse the run."""


class EnvironmentProblemError(UserError, RuntimeError):
  """The machine or network: a full disk, no download, a shared directory."""


class TrainingStoppedError(UserError, RuntimeError):
  """The training stopped itself (e.g. a NaN loss); the checkpoint is kept."""


class WorkerError(RuntimeError):
  """A TFF worker failed: unreachable, crashed, or lost during a run."""


class WorkerUnavailableError(WorkerError):
  """A TFF worker cannot be reached.

  Raised by the execution context's stub in place of a gRPC UNAVAILABLE (or
  a call past its deadline), with one line naming the worker.

  Attributes:
    address: The worker's `host:port`.
  """

  def __init__(self, address: str, message: str):
    super().__init__(message)
    self.address = address


class WorkerCrashedError(WorkerError):
  """A worker was killed by a signal (e.g. SIGSEGV) before it served."""


class WorkerLostError(UserError, WorkerError):
  """A TFF worker died or became unreachable during a run.

  Attributes:
    address: The worker's `host:port`.
    resume_round: The round of the newest checkpoint (0: none after the
      initial state); a rerun of the same command resumes after it.
  """

  def __init__(self, message: str, address: str, resume_round: int):
    super().__init__(message)
    self.address = address
    self.resume_round = resume_round
