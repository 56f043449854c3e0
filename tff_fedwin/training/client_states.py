"""Persistent per-client states (e.g. SCAFFOLD control variates) keyed by id.

The loop keeps every sampled client's state here between rounds, in RAM: N x
(state size) for N participating clients. Larger populations use
`DiskClientStateStore`; the loop picks one (`client_state_stores`). Design and
memory figures: docs/design.md secs. 3.3, 5.5.
"""

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import IO, Any

import numpy as np
import tensorflow as tf

from tff_fedwin.training import client_state_spec

_FORMAT_VERSION = 1
_IDS_KEY = 'client_ids'
_METADATA_KEY = 'metadata'


def _leaf_key(client_index: int, leaf_index: int) -> str:
  return f'state_{client_index}_leaf_{leaf_index}'


class ClientStateStore:
  """Client states keyed by client id, in RAM, created lazily from a template.

  A client's state is a copy of `template` (nested numpy arrays, e.g.
  `client_state.initial_client_state(model_fn)`) until `update` replaces it.
  Memory: N x (state size) for the N clients seen so far (docs/design.md
  sec. 3.3).

  Usage:

    store = ClientStateStore(scaffold.initial_client_state(model_fn))
    states = store.get(sampled_ids)
    state, new_states, metrics = process.next(state, data, states)
    store.update(sampled_ids, new_states)
    store.save(path)  # atomic
    store = ClientStateStore.load(path, template)
  """

  def __init__(self, template: Any):
    """Initializes an empty store.

    Args:
      template: The initial state of every client, a nested structure of
        numpy arrays (or values convertible to them). It is copied.

    Raises:
      ValueError: If `template` has no array leaves.
    """
    self._spec = client_state_spec.StateSpec(template)
    self._states: dict[str, Any] = {}

  @property
  def template(self) -> Any:
    """A copy of the initial state given to new clients."""
    return self._spec.new_state()

  @property
  def client_ids(self) -> tuple[str, ...]:
    """Ids of the clients that have a state, in order of first appearance."""
    return tuple(self._states)

  def __len__(self) -> int:
    return len(self._states)

  def __contains__(self, client_id: object) -> bool:
    return client_id in self._states

  def get(self, client_ids: Sequence[str]) -> list[Any]:
    """The states of `client_ids`, creating initial states for new clients.

    Args:
      client_ids: Client ids (str); duplicates are allowed.

    Returns:
      One state per id, in the order of `client_ids`. The returned states are
      copies: changing them does not change the store.

    Raises:
      ValueError: If `client_ids` is not a sequence of str.
    """
    client_ids = client_state_spec.check_client_ids(
        client_ids, allow_duplicates=True
    )
    states = []
    for client_id in client_ids:
      if client_id not in self._states:
        self._states[client_id] = self._spec.new_state()
      states.append(client_state_spec.copy_state(self._states[client_id]))
    return states

  def update(self, client_ids: Sequence[str], states: Sequence[Any]) -> None:
    """Replaces the states of `client_ids` by `states`.

    Validates every state before changing anything: on error the store is
    unchanged.

    Args:
      client_ids: Distinct client ids (str).
      states: One state per id, with the template's nested structure (list and
        tuple containers are interchangeable), shapes and dtypes.

    Raises:
      ValueError: If `client_ids` has duplicates or non-str ids, if `states`
        and `client_ids` differ in length, or if a state does not match the
        template.
    """
    client_ids, leaves = self._spec.checked_leaves_all(client_ids, states)
    for client_id, state_leaves in zip(client_ids, leaves):
      self._states[client_id] = self._spec.pack(
          [np.array(leaf, copy=True) for leaf in state_leaves]
      )

  def save(self, path: str) -> None:
    """Writes the store to `path` (an .npz file, name used as given) atomically.

    Through `atomic_write`: `path` holds the previous or the new store, never
    a partial file; mode 0600.

    Args:
      path: The destination file.
    """
    ids = list(self._states)
    arrays = {
        _IDS_KEY: np.array(ids, dtype=np.str_),
        _METADATA_KEY: np.array(json.dumps(self._metadata())),
    }
    for i, client_id in enumerate(ids):
      for j, leaf in enumerate(tf.nest.flatten(self._states[client_id])):
        arrays[_leaf_key(i, j)] = leaf
    atomic_write(path, lambda f: np.savez(f, **arrays), binary=True)

  @classmethod
  def load(cls, path: str, template: Any) -> 'ClientStateStore':
    """Restores a store written by `save`.

    Args:
      path: A file written by `ClientStateStore.save`.
      template: The template of the saved store (gives the nested structure
        and containers, which are not stored); its structure, shapes and
        dtypes must match the saved ones.

    Returns:
      A store with the saved ids (in their order) and states.

    Raises:
      ValueError: If `template` does not match the saved store, or `path` is
        not a file written by `save`.
    """
    store = cls(template)
    spec = store._spec  # pylint: disable=protected-access
    with np.load(os.fspath(path), allow_pickle=False) as data:
      if _IDS_KEY not in data or _METADATA_KEY not in data:
        raise ValueError(f'`path` {path!r} is not a saved ClientStateStore.')
      metadata = json.loads(str(data[_METADATA_KEY]))
      if metadata.get('format_version') != _FORMAT_VERSION:
        raise ValueError(
            f'`path` {path!r} has format version '
            f'{metadata.get("format_version")!r}, expected {_FORMAT_VERSION}.'
        )
      spec.check_metadata(metadata, repr(path))
      for i, client_id in enumerate(data[_IDS_KEY].tolist()):
        leaves = [data[_leaf_key(i, j)] for j in range(len(spec.leaves))]
        store._states[client_id] = spec.pack(leaves)  # pylint: disable=protected-access
    return store

  def _metadata(self) -> dict[str, Any]:
    return {'format_version': _FORMAT_VERSION, **self._spec.metadata()}


def atomic_write(
    path: str, write: Callable[[IO], None], *, binary: bool
) -> None:
  """Writes `path` through `write(file)` so that no partial file can remain.

  Writes a temporary file in the same directory (mode 0600), fsyncs it,
  renames it over `path` (`os.replace`) and fsyncs the directory. On any
  failure the temporary file is removed and `path` is untouched.
  """
  path = os.fspath(path)
  directory = os.path.dirname(os.path.abspath(path))
  fd, temp_path = tempfile.mkstemp(
      dir=directory, prefix=f'.{os.path.basename(path)}.', suffix='.tmp'
  )
  try:
    with os.fdopen(fd, 'wb' if binary else 'w') as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(temp_path, path)
  except BaseException:
    try:
      os.remove(temp_path)
    except OSError:
      pass
    raise
  _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
  """Makes a rename in `directory` durable (best effort: not on all OSes)."""
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)
