"""Training-loop support: persistent per-client states."""

from tff_fedwin.training.client_states import ClientStateStore
