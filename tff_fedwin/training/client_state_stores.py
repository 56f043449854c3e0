"""Which client-state store a run uses, and the checkpoint steps of each.

`open_client_states` gives the loop a store with the same five methods for
both kinds (docs/design.md sec. 5.5):

* `memory`: `ClientStateStore` in RAM; a checkpoint writes every client's
  state to `checkpoints/client_states_<t>.npz`. For populations whose states
  fit in RAM several times over.
* `disk`: `DiskClientStateStore` (it has the five methods itself); RAM holds
  the clients of two rounds, a checkpoint writes the clients updated since
  the previous one.
* `auto`: `disk` when the population's states (number of clients x state size)
  exceed `AUTO_DISK_BYTES`, else `memory`. The choice depends only on the
  population and the template, so a resumed run makes the same one.
"""

import os
import re
from collections.abc import Collection, Sequence
from typing import Any, Optional, Protocol

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin.training import client_state_spec
from tff_fedwin.training import client_states as client_states_lib
from tff_fedwin.training import disk_client_states

KINDS = choices.CLIENT_STATE_KINDS
# 1 GiB: e.g. 220 SCAFFOLD clients of the 1.2M-parameter EMNIST CNN.
AUTO_DISK_BYTES = 2**30
DEFAULT_DISK_SUBDIR = 'client_states'
_SNAPSHOT_PATTERN = re.compile(r'^client_states_(\d+)\.npz$')


class ClientStates(Protocol):
  """What the loop needs of a client-state store."""

  def get(self, client_ids: Sequence[str]) -> list[Any]:
    ...

  def update(self, client_ids: Sequence[str], states: Sequence[Any]) -> None:
    ...

  def prepare_checkpoint(self, round_num: int) -> None:
    """Makes round t's states durable, before the program state of round t."""

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int]
  ) -> None:
    """After the program state of round t; `kept_rounds`: versions on disk."""

  def close(self) -> None:
    ...


def snapshot_file(checkpoint_dir: str, round_num: int) -> str:
  """The path of round t's `memory` store snapshot."""
  return os.path.join(checkpoint_dir, f'client_states_{round_num}.npz')


class MemoryClientStates:
  """A `ClientStateStore` with one full snapshot file per checkpoint."""

  def __init__(
      self, store: client_states_lib.ClientStateStore, checkpoint_dir: str
  ):
    self.store = store
    self._checkpoint_dir = checkpoint_dir

  def get(self, client_ids: Sequence[str]) -> list[Any]:
    return self.store.get(client_ids)

  def update(self, client_ids: Sequence[str], states: Sequence[Any]) -> None:
    self.store.update(client_ids, states)

  def prepare_checkpoint(self, round_num: int) -> None:
    self.store.save(snapshot_file(self._checkpoint_dir, round_num))

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int]
  ) -> None:
    """Removes the snapshots of program states no longer kept."""
    del round_num  # Every kept round's snapshot stays.
    for entry in os.listdir(self._checkpoint_dir):
      match = _SNAPSHOT_PATTERN.match(entry)
      if match and int(match.group(1)) not in kept_rounds:
        os.remove(os.path.join(self._checkpoint_dir, entry))

  def checkpoint_files(self, round_num: int) -> dict[str, list[str]]:
    """Round t's snapshot, checked before it is loaded."""
    return {'files': [snapshot_file(self._checkpoint_dir, round_num)]}

  def close(self) -> None:
    pass


def choose_kind(kind: str, template: Any, num_clients: int) -> str:
  """`memory` or `disk` for `kind` in `KINDS` (`auto` by the population size)."""
  kind = checks.check_choice('client_states', kind, KINDS)
  if kind != 'auto':
    return kind
  state_bytes = client_state_spec.StateSpec(template).nbytes
  return 'disk' if num_clients * state_bytes > AUTO_DISK_BYTES else 'memory'


def disk_directory(checkpoint_dir: str, directory: Optional[str]) -> str:
  """A disk store's directory: `directory`, else under `checkpoint_dir`."""
  return directory or os.path.join(checkpoint_dir, DEFAULT_DISK_SUBDIR)


def open_client_states(
    kind: str,
    template: Any,
    client_ids: Sequence[str],
    *,
    checkpoint_dir: str,
    directory: Optional[str] = None,
    round_num: Optional[int] = None,
) -> ClientStates:
  """A new store (`round_num` None) or the states of checkpoint `round_num`.

  Args:
    kind: One of `KINDS`.
    template: The initial state of every client.
    client_ids: The population, in a fixed order.
    checkpoint_dir: The run's checkpoint directory (memory snapshots; owner
      of a disk store).
    directory: The disk store's directory; default
      `<checkpoint_dir>/client_states`.
    round_num: The checkpoint to restore, or None for a fresh store.

  Raises:
    ValueError: If `kind` is not in `KINDS`, or the store cannot be used.
    FileNotFoundError: If the states of checkpoint `round_num` are missing.
  """
  kind = choose_kind(kind, template, len(client_ids))
  if kind == 'memory':
    if round_num is None:
      store = client_states_lib.ClientStateStore(template)
    else:
      path = snapshot_file(checkpoint_dir, round_num)
      if not os.path.exists(path):
        raise client_state_spec.MissingClientStatesError(
            f'The client states of the checkpoint of round {round_num} are '
            f'missing: {path} (was the run made with disk client states?).'
        )
      store = client_states_lib.ClientStateStore.load(path, template)
    return MemoryClientStates(store, checkpoint_dir)
  directory = disk_directory(checkpoint_dir, directory)
  owner = os.path.abspath(checkpoint_dir)
  # Round 0's states are the template's: a fresh store.
  if round_num is None or round_num == 0:
    store = disk_client_states.DiskClientStateStore.create(
        directory,
        template,
        client_ids,
        owner=owner,
        run_dir=os.path.dirname(owner),
    )
  else:
    store = disk_client_states.DiskClientStateStore.restore(
        directory, template, client_ids, owner=owner, round_num=round_num
    )
  return store
