"""Federated partitions of centralized data, offline data sources, and
`ClientData` declared to build its datasets from the ids."""

from tff_fedwin.data.from_ids import datasets_from_ids
from tff_fedwin.data.from_ids import DatasetsFromIds
from tff_fedwin.data.partition import client_data_from_partition
from tff_fedwin.data.partition import default_client_ids
from tff_fedwin.data.partition import dirichlet_label_partition
from tff_fedwin.data.sources import load_mnist
from tff_fedwin.data.sources import load_npz
from tff_fedwin.data.sources import mnist_path
