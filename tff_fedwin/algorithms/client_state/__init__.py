"""The shared machinery of algorithms with a model-sized state per client.

An algorithm is one `ClientStateAlgorithm` of math (`scaffold.Scaffold`,
`feddyn.FedDyn`); `build_client_state_process` makes its TFF process, whose
`next` takes and returns the sampled clients' `ClientState`s
(docs/design.md secs. 3 and 4.9).
"""

from tff_fedwin.algorithms.client_state.algorithm import ClientStateAlgorithm
from tff_fedwin.algorithms.client_state.client import initial_client_state
from tff_fedwin.algorithms.client_state.process import build_client_state_process
from tff_fedwin.algorithms.client_state.process import ClientStateProcess
from tff_fedwin.algorithms.client_state.process import model_weights_to_evaluate
from tff_fedwin.algorithms.client_state.types import ClientResult
from tff_fedwin.algorithms.client_state.types import ClientState
from tff_fedwin.algorithms.client_state.types import ServerState
