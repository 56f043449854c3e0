"""Training-loop support: the round loop, persistent per-client states."""

from tff_fedwin.training.client_states import ClientStateStore
from tff_fedwin.training.divergence import TrainingDivergedError
from tff_fedwin.training.loop import flatten_scalar_metrics
from tff_fedwin.training.loop import LearningProcessRunner
from tff_fedwin.training.loop import RoundRunner
from tff_fedwin.training.loop import run_training
from tff_fedwin.training.loop import sample_clients
from tff_fedwin.training.loop import ScaffoldRunner
