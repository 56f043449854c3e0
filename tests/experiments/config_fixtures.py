"""The valid configuration the tests of tff_fedwin.experiments.config break."""

from tff_fedwin import experiments

# A valid configuration the tables of the config tests break one field (or two)
# at a time.
BASE = experiments.ExperimentConfig(
    task='npz',
    data_npz='data.npz',
    num_clients=10,
    clients_per_round=2,
    total_rounds=10,
)
