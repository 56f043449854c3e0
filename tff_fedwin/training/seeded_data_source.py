"""A `tff.program.FederatedDataSource` whose round k is a function of (seed, k).

A drop-in for TFF's unseeded `tff.program.ClientIdDataSource`: selection k is
`sampling.sample_clients(client_ids, n, seed, k)`, the round loop's rule, and
the iterator's state (ids, seed, selections made) is saved in every
`ProgramState`, so a restarted program continues to the bit
(docs/program_api.md, 'Which clients train').
"""

import json
from collections.abc import Sequence
from typing import Optional

import numpy as np
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.training import sampling


def _checked_ids(client_ids: Sequence[str]) -> list[str]:
  if isinstance(client_ids, str) or not isinstance(client_ids, Sequence):
    raise TypeError(
        '`client_ids` must be a sequence of str (e.g. '
        f'`client_data.client_ids`), got {type(client_ids).__name__}.'
    )
  if not client_ids:
    raise ValueError('`client_ids` must not be empty.')
  if not all(isinstance(c, str) for c in client_ids):
    raise TypeError('`client_ids` must hold str only.')
  return list(client_ids)


def _client_ids_type() -> tff.FederatedType:
  return tff.FederatedType(np.str_, tff.CLIENTS)


class SeededClientIdDataSourceIterator(tff.program.FederatedDataSourceIterator):
  """Selections of client ids: the k-th a function of (seed, k) alone."""

  def __init__(
      self, client_ids: Sequence[str], seed: int, selections_made: int = 0
  ):
    """An iterator whose next `select` is selection `selections_made + 1`.

    Args:
      client_ids: The population, in a fixed order (`ClientData.client_ids`).
      seed: An int >= 0.
      selections_made: How many selections came before (a restored state).

    Raises:
      TypeError: If `client_ids` is not a sequence of str.
      ValueError: If it is empty, or `seed` or `selections_made` < 0.
    """
    self._client_ids = _checked_ids(client_ids)
    self._seed = checks.check_int('seed', seed, minimum=0)
    self._selections_made = checks.check_int(
        'selections_made', selections_made, minimum=0
    )

  @classmethod
  def from_bytes(cls, buffer: bytes) -> 'SeededClientIdDataSourceIterator':
    """The iterator `to_bytes` wrote (`tff.program.Serializable`)."""
    state = json.loads(buffer.decode('utf-8'))
    return cls(state['client_ids'], state['seed'], state['selections_made'])

  def to_bytes(self) -> bytes:
    """Its client ids, seed and selections made, as UTF-8 JSON."""
    return json.dumps(
        {
            'client_ids': self._client_ids,
            'seed': self._seed,
            'selections_made': self._selections_made,
        }
    ).encode('utf-8')

  @property
  def federated_type(self) -> tff.FederatedType:
    """`{str}@CLIENTS`, as TFF's `ClientIdDataSourceIterator`."""
    return _client_ids_type()

  def select(self, k: Optional[int] = None) -> list[str]:
    """The next selection: `k` distinct client ids.

    The j-th call (j = 1, 2, ...; counted across `to_bytes`/`from_bytes`)
    returns `sampling.sample_clients(client_ids, k, seed, j)`.

    Raises:
      ValueError: If `k` is not an integer in [1, number of client ids].
    """
    checks.check_int('k', k, minimum=1, maximum=len(self._client_ids))
    self._selections_made += 1
    return sampling.sample_clients(
        self._client_ids, k, self._seed, self._selections_made
    )

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, SeededClientIdDataSourceIterator):
      return NotImplemented
    return (self._client_ids, self._seed, self._selections_made) == (
        other._client_ids,
        other._seed,
        other._selections_made,
    )


class SeededClientIdDataSource(tff.program.FederatedDataSource):
  """TFF's `ClientIdDataSource` with selections from (seed, round) alone.

  A drop-in for `tff.program.ClientIdDataSource(client_ids)` in
  `tff.learning.programs.train_model` (`train_data_source=`) and in an
  `EvaluationManager`: the same `{str}@CLIENTS` values, ids of the clients
  of each round, to compose with a dataset computation.
  """

  def __init__(self, client_ids: Sequence[str], *, seed: int = 0):
    """A data source over `client_ids` (e.g. `client_data.client_ids`).

    Raises:
      TypeError: If `client_ids` is not a sequence of str.
      ValueError: If it is empty or `seed` < 0.
    """
    self._client_ids = _checked_ids(client_ids)
    self._seed = checks.check_int('seed', seed, minimum=0)

  @property
  def federated_type(self) -> tff.FederatedType:
    return _client_ids_type()

  def iterator(self) -> SeededClientIdDataSourceIterator:
    """A new iterator, at the first selection."""
    return SeededClientIdDataSourceIterator(self._client_ids, self._seed)
