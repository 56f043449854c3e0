"""Checkpoints of a run: program states, client-state files, resume checks.

Round t's client states are written (atomically) to
`checkpoints/client_states_<t>.npz` before the program state version t, so a
version on disk always has its client states (docs/design.md sec. 5).
"""

import collections
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow_federated as tff

from tff_fedwin.training import client_states as client_states_lib

# Program states kept on disk (tff.program.FileProgramStateManager keeps the
# first one, version 0, as well).
CHECKPOINTS_TO_KEEP = 5
_CLIENT_STATES_PATTERN = re.compile(r'^client_states_(\d+)\.npz$')


class RunIdentity(NamedTuple):
  """The arguments a resumed run must share with the checkpoint it resumes."""

  seed: int
  clients_per_round: int
  num_clients: int


class Restored(NamedTuple):
  """The newest checkpoint: its server state, round and version."""

  server_state: Any
  round_num: int
  version: int


def client_states_file(checkpoint_dir: str, round_num: int) -> str:
  """The path of round `round_num`'s client states."""
  return os.path.join(checkpoint_dir, f'client_states_{round_num}.npz')


def _program_state(
    state: Any, round_num: int, identity: RunIdentity
) -> Mapping[str, Any]:
  return collections.OrderedDict(
      server_state=state,
      round_num=np.int64(round_num),
      seed=np.int64(identity.seed),
      clients_per_round=np.int64(identity.clients_per_round),
      num_clients=np.int64(identity.num_clients),
  )


class Checkpoints:
  """Saves and restores one run's checkpoints in `checkpoint_dir`.

  The `tff.program` state manager's methods are coroutines; `run` runs one to
  completion (e.g. `asyncio.AbstractEventLoop.run_until_complete`).
  """

  def __init__(
      self,
      checkpoint_dir: str,
      *,
      identity: RunIdentity,
      run: Callable[[Any], Any],
  ):
    self.directory = checkpoint_dir
    self._identity = identity
    self._run = run
    self._manager = tff.program.FileProgramStateManager(
        checkpoint_dir, keep_total=CHECKPOINTS_TO_KEEP
    )

  def save(
      self,
      state: Any,
      round_num: int,
      store: Optional[client_states_lib.ClientStateStore],
  ) -> None:
    """Saves `store` (if any), then the program state as version t."""
    if store is not None:
      store.save(client_states_file(self.directory, round_num))
    self._run(
        self._manager.save(
            _program_state(state, round_num, self._identity), round_num
        )
    )
    if store is not None:
      self._remove_stale_client_states()

  def _remove_stale_client_states(self) -> None:
    keep = set(self._run(self._manager.get_versions()) or [])
    for entry in os.listdir(self.directory):
      match = _CLIENT_STATES_PATTERN.match(entry)
      if match and int(match.group(1)) not in keep:
        os.remove(os.path.join(self.directory, entry))

  def load_latest(
      self, initial_state: Any, *, total_rounds: int
  ) -> Optional[Restored]:
    """The newest program state, or None; ValueError if it does not fit."""
    structure = _program_state(initial_state, 0, RunIdentity(0, 0, 0))
    loaded, version = self._run(self._manager.load_latest(structure))
    if loaded is None:
      return None
    round_num = self._check(loaded, total_rounds=total_rounds)
    return Restored(loaded['server_state'], round_num, version)

  def _check(self, loaded: Mapping[str, Any], *, total_rounds: int) -> int:
    for key, argument in (
        ('seed', 'seed'),
        ('clients_per_round', 'clients_per_round'),
        ('num_clients', 'train_client_data'),
    ):
      value = getattr(self._identity, key)
      if int(loaded[key]) != value:
        raise ValueError(
            f'`{argument}` differs from the checkpoint in {self.directory}: '
            f'{key} is {value} now and {int(loaded[key])} there; resume with '
            'the same arguments or use another `experiment_name`.'
        )
    round_num = int(loaded['round_num'])
    if round_num > total_rounds:
      raise ValueError(
          f'`total_rounds` ({total_rounds}) is smaller than the round of the '
          f'newest checkpoint in {self.directory} ({round_num}).'
      )
    return round_num

  def load_client_states(
      self, round_num: int, template: Any
  ) -> client_states_lib.ClientStateStore:
    """The client states of round `round_num`; FileNotFoundError if missing."""
    path = client_states_file(self.directory, round_num)
    if not os.path.exists(path):
      raise FileNotFoundError(
          f'The client states of the checkpoint of round {round_num} '
          f'are missing: {path}.'
      )
    return client_states_lib.ClientStateStore.load(path, template)
