"""The shape of a client state: template, checks, copies, errors of stores.

Both client-state stores (`ClientStateStore` in RAM, `DiskClientStateStore` in
files) keep states with one template's nested structure, shapes and dtypes;
this module is the one place that checks ids and states against it.
"""

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tff_fedwin import errors


class ClientStatesError(errors.RunDirectoryError, ValueError):
  """Saved client states cannot be used: another run's, locked, or newer."""


class MissingClientStatesError(FileNotFoundError, ClientStatesError):
  """The client states of the checkpoint to resume are missing."""


class DamagedClientStatesError(ClientStatesError):
  """A client-state file's bytes are not those written (CRC-32, truncation)."""


def structure_signature(structure: Any) -> str:
  """A printable description of a nested structure, without its values."""
  return repr(tf.nest.map_structure(lambda _: '*', structure))


def check_client_ids(
    client_ids: Sequence[str], *, allow_duplicates: bool
) -> list[str]:
  """`client_ids` as a list; ValueError unless a sequence of (distinct) str."""
  if isinstance(client_ids, (str, bytes)) or not isinstance(
      client_ids, Sequence
  ):
    raise ValueError(
        '`client_ids` must be a sequence of str, got '
        f'{type(client_ids).__name__}.'
    )
  for client_id in client_ids:
    if not isinstance(client_id, str):
      raise ValueError(
          f'`client_ids` must contain str ids, got {client_id!r} of type '
          f'{type(client_id).__name__}.'
      )
  if not allow_duplicates and len(set(client_ids)) != len(client_ids):
    counts = collections.Counter(client_ids)
    duplicates = sorted(c for c, n in counts.items() if n > 1)
    raise ValueError(f'`client_ids` has duplicate ids: {duplicates}.')
  return list(client_ids)


def check_states_length(states: Sequence[Any], num_ids: int) -> None:
  """ValueError unless `states` is a sequence with one state per id."""
  if isinstance(states, (str, bytes)) or not isinstance(states, Sequence):
    raise ValueError(
        f'`states` must be a sequence of states, got {type(states).__name__}.'
    )
  if len(states) != num_ids:
    raise ValueError(
        f'`states` has {len(states)} elements but `client_ids` has '
        f'{num_ids}; they must have the same length.'
    )


class StateSpec:
  """A client-state template (nested numpy arrays) and the checks against it."""

  def __init__(self, template: Any):
    """Copies `template`; ValueError if it has no array leaves."""
    leaves = tf.nest.flatten(template)
    if not leaves:
      raise ValueError('`template` must contain at least one array.')
    self._template = tf.nest.pack_sequence_as(
        template, [np.array(leaf, copy=True) for leaf in leaves]
    )
    self.leaves = tuple(tf.nest.flatten(self._template))

  def new_state(self) -> Any:
    """A fresh copy of the template."""
    return copy_state(self._template)

  def pack(self, leaves: Sequence[np.ndarray]) -> Any:
    """Leaves in the template's order -> a state in its containers."""
    return tf.nest.pack_sequence_as(self._template, list(leaves))

  @property
  def nbytes(self) -> int:
    """Bytes of one state."""
    return sum(leaf.nbytes for leaf in self.leaves)

  def metadata(self) -> dict[str, Any]:
    """Structure, shapes and dtypes, as JSON-serializable values."""
    return {
        'structure': structure_signature(self._template),
        'shapes': [list(leaf.shape) for leaf in self.leaves],
        'dtypes': [leaf.dtype.str for leaf in self.leaves],
    }

  def check_metadata(self, saved: dict[str, Any], where: str) -> None:
    """ValueError naming the difference if `saved` is another template's."""
    expected = self.metadata()
    for key in ('structure', 'shapes', 'dtypes'):
      if saved.get(key) != expected[key]:
        raise ClientStatesError(
            f'`template` does not match the client states saved in {where}: '
            f'saved {key} {saved.get(key)}, template {key} {expected[key]}.'
        )

  def checked_leaves(self, state: Any, name: str) -> list[np.ndarray]:
    """The leaves of `state` as arrays (not copied); ValueError if unlike."""
    try:
      tf.nest.assert_same_structure(self._template, state, check_types=False)
    except (ValueError, TypeError) as e:
      raise ValueError(
          f'`{name}` does not have the template structure '
          f'{structure_signature(self._template)}: {e}'
      ) from e
    leaves = []
    for j, (expected, value) in enumerate(
        zip(self.leaves, tf.nest.flatten(state))
    ):
      value = np.asarray(value)
      if value.shape != expected.shape or value.dtype != expected.dtype:
        raise ValueError(
            f'`{name}` leaf {j} has shape {value.shape} and dtype '
            f'{value.dtype}; the template has shape {expected.shape} and '
            f'dtype {expected.dtype}.'
        )
      leaves.append(value)
    return leaves

  def checked_leaves_all(
      self, client_ids: Sequence[str], states: Sequence[Any]
  ) -> tuple[list[str], list[list[np.ndarray]]]:
    """Checked distinct ids and the leaves of each state (not copied).

    Raises:
      ValueError: If an id is repeated or not a str, the lengths differ, or
        a state is not like the template; nothing is changed by then.
    """
    client_ids = check_client_ids(client_ids, allow_duplicates=False)
    check_states_length(states, len(client_ids))
    leaves = [
        self.checked_leaves(state, f'states[{i}] (client {client_id!r})')
        for i, (client_id, state) in enumerate(zip(client_ids, states))
    ]
    return client_ids, leaves


def copy_state(state: Any) -> Any:
  """A deep copy of a nested structure of arrays."""
  return tf.nest.map_structure(lambda a: np.array(a, copy=True), state)
