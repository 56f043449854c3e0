"""The gRPC stub to one TFF worker, which gives up on a dead worker.

`WorkerStub` is TFF's `tff.framework.RemoteExecutorGrpcStub` with one change:
an UNAVAILABLE worker that does not come back raises `WorkerUnavailableError`
instead of being retried forever (docs/runtime.md, 'A dead worker fails
instead of hanging').
"""

import grpc
import tensorflow_federated as tff

from tff_fedwin import errors

GRPC_MAX_MESSAGE_BYTES = 2 * 1000 * 1000 * 1000
GRPC_CHANNEL_OPTIONS = (
    ('grpc.max_message_length', GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_receive_message_length', GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_send_message_length', GRPC_MAX_MESSAGE_BYTES),
)


WorkerUnavailableError = errors.WorkerUnavailableError


class WorkerStub(tff.framework.RemoteExecutorStub):
  """`tff.framework.RemoteExecutorGrpcStub` that gives up on a dead worker.

  On UNAVAILABLE (which TFF retries forever) it waits up to
  `reconnect_timeout_seconds` for the channel to become ready; if it does not,
  it raises `WorkerUnavailableError`, which TFF does not retry. Failures to
  dispose of values or executors are ignored, as TFF does itself.
  """

  def __init__(
      self,
      address: str,
      channel: grpc.Channel,
      reconnect_timeout_seconds: float,
  ):
    self._address = address
    self._channel = channel
    self._reconnect_timeout_seconds = reconnect_timeout_seconds
    self._stub = tff.framework.RemoteExecutorGrpcStub(channel)
    self._closed = False

  def close(self) -> None:
    """Marks the channel as closed: disposal calls become no-ops."""
    self._closed = True

  def _call(self, method: str, request):
    try:
      return getattr(self._stub, method)(request)
    except tff.framework.RetryableError as e:
      if self._closed:
        raise
      if wait_until_ready(self._channel, self._reconnect_timeout_seconds):
        raise  # Transient: let TFF retry.
      raise WorkerUnavailableError(
          self._address,
          f'TFF worker {self._address} is unreachable: {method} failed '
          f'({describe_rpc_error(e)}) and the worker did not answer again '
          f'within {self._reconnect_timeout_seconds} s. Has it died?',
      ) from e

  def _dispose_call(self, method: str, request):
    if self._closed:
      return None
    try:
      return getattr(self._stub, method)(request)
    except (grpc.RpcError, tff.framework.RetryableError, ValueError):
      return None  # The worker or the channel is gone, and its values too.

  def get_executor(self, request):
    return self._call('get_executor', request)

  def create_value(self, request):
    return self._call('create_value', request)

  def create_struct(self, request):
    return self._call('create_struct', request)

  def create_call(self, request):
    return self._call('create_call', request)

  def create_selection(self, request):
    return self._call('create_selection', request)

  def compute(self, request):
    return self._call('compute', request)

  def dispose(self, request):
    return self._dispose_call('dispose', request)

  def dispose_executor(self, request):
    return self._dispose_call('dispose_executor', request)

  @property
  def is_ready(self) -> bool:
    return self._stub.is_ready


def describe_rpc_error(error: Exception) -> str:
  """`CODE: details` of the gRPC call behind `error`, else its repr."""
  for candidate in (error, error.__cause__):
    if isinstance(candidate, grpc.Call):
      try:
        return f'{candidate.code().name}: {candidate.details()}'
      except Exception:  # pylint: disable=broad-except
        pass
  return repr(error)


def wait_until_ready(channel: grpc.Channel, timeout_seconds: float) -> bool:
  """Whether `channel` becomes ready within `timeout_seconds`."""
  future = grpc.channel_ready_future(channel)
  try:
    future.result(timeout=timeout_seconds)
    return True
  except grpc.FutureTimeoutError:
    return False
  finally:
    future.cancel()
