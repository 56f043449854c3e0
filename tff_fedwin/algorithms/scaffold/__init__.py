"""SCAFFOLD (Karimireddy et al. 2020, option II) with client control variates.

`build_scaffold` returns a `ScaffoldProcess` whose `next` takes and returns
the sampled clients' `ScaffoldClientState`s; `initial_client_state` gives
c_i = 0 (docs/design.md sec. 3).
"""

from tff_fedwin.algorithms.scaffold.client import build_scaffold_client_update
from tff_fedwin.algorithms.scaffold.client import CLIENT_LOSSES
from tff_fedwin.algorithms.scaffold.client import initial_client_state
from tff_fedwin.algorithms.scaffold.client import LABEL_KEY
from tff_fedwin.algorithms.scaffold.client import option_ii_control_variate
from tff_fedwin.algorithms.scaffold.process import build_scaffold
from tff_fedwin.algorithms.scaffold.process import model_weights_to_evaluate
from tff_fedwin.algorithms.scaffold.process import ScaffoldProcess
from tff_fedwin.algorithms.scaffold.server import scaffold_server_update
from tff_fedwin.algorithms.scaffold.types import ScaffoldClientResult
from tff_fedwin.algorithms.scaffold.types import ScaffoldClientState
from tff_fedwin.algorithms.scaffold.types import ScaffoldServerState
