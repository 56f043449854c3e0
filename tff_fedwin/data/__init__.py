"""Federated partitions of centralized data, offline data sources, and
`ClientData` declared to build its datasets from the ids.

The file readers (`sources`, `leaf`, `leaf_cache`, `text_records`,
`preloaded`) import without TensorFlow, so a script checks its data files
before the heavy imports; the names that need TensorFlow and TFF (the
partitions and `ClientData`) are imported on first use (PEP 562
`__getattr__`, as in `tff_fedwin.experiments`).
"""

import typing

from tff_fedwin import lazy_names
from tff_fedwin.data.sources import load_mnist
from tff_fedwin.data.sources import load_npz
from tff_fedwin.data.sources import mnist_path

if typing.TYPE_CHECKING:  # The names imported on first use, for type checkers.
  from tff_fedwin.data.from_ids import datasets_from_ids
  from tff_fedwin.data.from_ids import DatasetsFromIds
  from tff_fedwin.data.partition import client_data_from_partition
  from tff_fedwin.data.partition import default_client_ids
  from tff_fedwin.data.partition import dirichlet_label_partition

# name -> the module that defines it; imported on first use (TensorFlow).
_HEAVY = {
    'datasets_from_ids': 'tff_fedwin.data.from_ids',
    'DatasetsFromIds': 'tff_fedwin.data.from_ids',
    'client_data_from_partition': 'tff_fedwin.data.partition',
    'default_client_ids': 'tff_fedwin.data.partition',
    'dirichlet_label_partition': 'tff_fedwin.data.partition',
}


__getattr__, __dir__ = lazy_names.module_hooks(__name__, _HEAVY, globals())
