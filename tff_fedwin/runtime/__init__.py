"""TFF worker lifecycle and execution contexts."""

from tff_fedwin.runtime import default_context  # Clean exit; see its docstring.
from tff_fedwin.runtime.contexts import create_remote_execution_context
from tff_fedwin.runtime.contexts import local_execution_context
from tff_fedwin.runtime.loopback import WorkerConfinementError
from tff_fedwin.runtime.multi_worker import create_multi_worker_context
from tff_fedwin.runtime.multi_worker import multi_worker_execution_context
from tff_fedwin.runtime.multi_worker import MultiWorkerContext
from tff_fedwin.runtime.program_context import local_federated_context
from tff_fedwin.runtime.program_context import remote_federated_context
from tff_fedwin.runtime.threaded_context import ThreadedAsyncContext
from tff_fedwin.runtime.worker_stub import WorkerUnavailableError
from tff_fedwin.runtime.workers import LocalWorker
from tff_fedwin.runtime.workers import running_workers
from tff_fedwin.runtime.workers import start_local_worker
from tff_fedwin.runtime.workers import worker_binary_path
from tff_fedwin.runtime.workers import WorkerCrashedError
