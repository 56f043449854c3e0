"""Checks that every TFF worker reads and writes the driver's shared directory.

The `files` transfer modes (docs/runtime.md sec. 4) pass paths, not values:
the driver and the workers must see the same directory, and both write there
(the driver its round inputs, the workers their state files). Before the
first round, `check_shared_dir` writes a file with fresh random content there
and has each worker read it back with a tiny TensorFlow computation, then has
each worker write a file of fresh content that the driver reads back; a
worker that cannot read or write there (a read-only or root-squashed mount),
or whose bytes differ (another machine's directory of the same name), is
named in one `SharedDirError` line, before any training.

Usage:

  check_shared_dir('/mnt/shared/fedwin', ['10.0.0.2:8000', '10.0.0.3:8000'])
"""

import functools
import os
import secrets
import weakref
from collections.abc import Sequence

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import errors
from tff_fedwin.runtime import contexts
from tff_fedwin.runtime import worker_stub

CHECK_FILE_PREFIX = '.tff_fedwin_shared_dir_check-'
_DETAIL_CHARS = 160
_TRANSFER_FLAGS = (
    '--client_state_transfer, --server_state_transfer and '
    '--client_data_transfer'
)


class SharedDirError(errors.EnvironmentProblemError):
  """A TFF worker does not see the shared directory the driver writes.

  Attributes:
    address: The worker's `host:port`.
    directory: The directory it does not see.
  """

  def __init__(self, message: str, address: str, directory: str):
    super().__init__(message)
    self.address = address
    self.directory = directory


@tff.tensorflow.computation(np.str_)
def _read_file(path):
  return tf.io.read_file(path)


@tff.tensorflow.computation(np.str_, np.str_)
def _write_file(path, contents):
  with tf.control_dependencies([tf.io.write_file(path, contents)]):
    return tf.constant(True)


def _call_on_worker(
    address: str, computation, *args, timeout_seconds: float
) -> object:
  """`computation(*args)` on the worker at `address`.

  A context of its own (as `contexts.create_remote_execution_context`), whose
  executors and channel are closed before returning.

  Raises:
    WorkerUnavailableError: If the worker does not answer.
    Exception: TFF's or TensorFlow's error if the computation fails there.
  """
  channel = grpc.insecure_channel(address, worker_stub.GRPC_CHANNEL_OPTIONS)
  stub = worker_stub.WorkerStub(address, channel, timeout_seconds)
  executors = weakref.WeakSet()
  context = tff.framework.SyncExecutionContext(
      **contexts.remote_context_args(
          stub, default_num_clients=0, on_executor=executors.add
      )
  )
  try:
    with tff.framework.get_context_stack().install(context):
      return computation(*args)
  finally:
    for executor in list(executors):
      try:
        executor.close()
      except Exception:  # pylint: disable=broad-except
        pass  # Disposing of executors is best effort.
    stub.close()
    channel.close()


def _one_line(error: Exception, path: str) -> str:
  """The error's gist on one line: gRPC's details (TF's message) if any."""
  details = getattr(error, 'details', None)
  text = details() if callable(details) else str(error)
  text = ' '.join(str(text).replace(path, '<file>').split())
  text = text or type(error).__name__
  if len(text) > _DETAIL_CHARS:
    text = text[:_DETAIL_CHARS] + '...'
  return text


def check_shared_dir(
    directory: str,
    addresses: Sequence[str],
    *,
    flags: str = _TRANSFER_FLAGS,
    timeout_seconds: float = 30.0,
) -> None:
  """Raises `SharedDirError` unless every worker reads and writes `directory`.

  Writes `directory/.tff_fedwin_shared_dir_check-<random>` with
  `secrets.token_hex(16)` (created with the directory if needed) and reads it
  on each worker in turn with `tf.io.read_file`; then each worker writes a
  file of fresh content there with `tf.io.write_file` and the driver reads it
  back. Every check file is removed, also on failure.

  Args:
    directory: The directory (str) the driver and the workers must share.
    addresses: `host:port` (str) of each running TFF worker; empty: the one
      worker of the installed TFF context (e.g. `local_execution_context`'s),
      named `local`.
    flags: The flags (str) whose `values` setting avoids the directory, named
      in the error's way out.
    timeout_seconds: How long (float) an unreachable worker may take.

  Raises:
    SharedDirError: One line naming the first worker that does not see the
      driver's file (or reads other content) or whose file the driver does
      not read back, the directory and the way out.
    WorkerUnavailableError: If a worker does not answer at all.
  """
  if addresses:
    runners = [
        (
            a,
            functools.partial(
                _call_on_worker, a, timeout_seconds=timeout_seconds
            ),
        )
        for a in addresses
    ]
  else:
    runners = [('local', lambda computation, *args: computation(*args))]
  directory = os.path.abspath(directory)
  os.makedirs(directory, exist_ok=True)
  token = secrets.token_hex(16)
  path = _check_path(directory)
  with open(path, 'w') as f:
    f.write(token)
  try:
    for address, run in runners:
      _check_read(address, run, path, token, directory, flags)
    for address, run in runners:
      _check_write(address, run, directory, flags)
  finally:
    _remove(path)


def _check_path(directory: str) -> str:
  return os.path.join(directory, CHECK_FILE_PREFIX + secrets.token_hex(4))


def _remove(path: str) -> None:
  try:
    os.remove(path)
  except OSError:
    pass


def _error(address, directory, flags, detail) -> SharedDirError:
  return SharedDirError(
      f'TFF worker {address} does not see the shared directory '
      f'{directory} ({detail}). Mount the same directory at {directory} '
      f'on every worker host, or set {flags} to values.',
      address,
      directory,
  )


def _check_read(address, run, path, token, directory, flags) -> None:
  """Raises `SharedDirError` unless the worker reads `token` from `path`."""
  try:
    seen = bytes(run(_read_file, path))
  except worker_stub.WorkerUnavailableError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    seen, detail = None, f'reading {path} failed: {_one_line(e, path)}'
  else:
    detail = f'it read other content from {path}'
  if seen != token.encode():
    raise _error(address, directory, flags, detail)


def _check_write(address, run, directory, flags) -> None:
  """Raises `SharedDirError` unless the driver reads what the worker wrote."""
  token = secrets.token_hex(16)
  path = _check_path(directory)
  try:
    try:
      run(_write_file, path, token)
    except worker_stub.WorkerUnavailableError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      detail = f'writing {path} failed: {_one_line(e, path)}'
      raise _error(address, directory, flags, detail) from None
    try:
      with open(path) as f:
        seen = f.read()
    except OSError as e:
      seen = None
      detail = f'the driver cannot read the file it wrote, {path}: {e.strerror}'
    else:
      detail = f'the driver reads other content from the file it wrote, {path}'
    if seen != token:
      raise _error(address, directory, flags, detail)
  finally:
    _remove(path)
