"""A `ClientData` declared to build its datasets from the client ids.

The workers can build a round's client datasets themselves, from the sampled
ids, with a `ClientData`'s `dataset_computation` (TFF's idiom; the runners'
`dataset_computation=`). That computation holds no examples when the
datasets are computed from the id: a database query (TFF's `SqlClientData`,
behind the EMNIST and StackOverflow loaders), or a generator seeded by the
id. TFF's in-memory `ClientData`s instead trace all their examples into it
as constants, so `tff_fedwin.experiments` writes those to a tensor bundle
first (`algorithms.client_data_bundle.builds_datasets_from_ids` decides).

A `ClientData` says which it is with the class attribute
`DATASETS_FROM_IDS = True`. TFF's loaders return `SqlClientData(...)
.preprocess(parse)`, whose wrapper class cannot say it;
`datasets_from_ids(client_data)` does, and changes nothing else.
"""

from typing import Any

import tensorflow_federated as tff


class DatasetsFromIds(tff.simulation.datasets.ClientData):
  """`client_data` declared to build its datasets from the ids.

  The same ids, element structure and datasets: `serializable_dataset_fn`
  is `client_data`'s. `create_tf_dataset_for_client` is TFF's base method
  (it checks the id is in `client_ids`, then calls
  `serializable_dataset_fn`).
  """

  DATASETS_FROM_IDS = True

  def __init__(self, client_data: tff.simulation.datasets.ClientData):
    """Wraps `client_data`.

    Raises:
      ValueError: If `client_data` is not a `ClientData`.
    """
    if not isinstance(client_data, tff.simulation.datasets.ClientData):
      raise ValueError(
          '`client_data` must be a tff.simulation.datasets.ClientData, got '
          f'{type(client_data).__name__}.'
      )
    self._client_data = client_data

  @property
  def client_ids(self) -> list[str]:
    return self._client_data.client_ids

  @property
  def element_type_structure(self) -> Any:
    return self._client_data.element_type_structure

  @property
  def serializable_dataset_fn(self):
    return self._client_data.serializable_dataset_fn


def datasets_from_ids(
    client_data: tff.simulation.datasets.ClientData,
) -> DatasetsFromIds:
  """`client_data`, declared to build its datasets from the ids.

  For a `ClientData` whose `serializable_dataset_fn` computes a client's
  dataset from a string tensor without holding the examples (a database
  query, a seeded generator), e.g. TFF's `emnist.load_data()[0]`.
  """
  return DatasetsFromIds(client_data)
