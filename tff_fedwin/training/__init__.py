"""The training loop: runs any federated process round by round, resumably."""

from tff_fedwin.training.checkpoints import CheckpointMismatchError
from tff_fedwin.training.client_state_spec import ClientStatesError
from tff_fedwin.training.client_state_spec import MissingClientStatesError
from tff_fedwin.training.client_state_stores import AUTO_DISK_BYTES
from tff_fedwin.training.client_state_stores import KINDS as CLIENT_STATE_KINDS
from tff_fedwin.training.client_state_stores import open_client_states
from tff_fedwin.training.client_states import ClientStateStore
from tff_fedwin.training.disk_client_states import DiskClientStateStore
from tff_fedwin.training.divergence import TrainingDivergedError
from tff_fedwin.training.forks import fork_run
from tff_fedwin.training.forks import forked_from_round
from tff_fedwin.training.forks import kept_rounds
from tff_fedwin.training.loop import run_training
from tff_fedwin.training.metrics import flatten_scalar_metrics
from tff_fedwin.training.runner import ForwardingRunner
from tff_fedwin.training.runner import RoundRunner
from tff_fedwin.training.sampling import client_datasets
from tff_fedwin.training.sampling import sample_clients
from tff_fedwin.training.seeded_data_source import SeededClientIdDataSource
