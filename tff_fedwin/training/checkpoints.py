"""Checkpoints of a run: program states, client-state steps, resume checks.

Round t's client states are made durable (`prepare_checkpoint`) before the
program state version t and finished after it, so a version on disk always
has its client states (docs/design.md secs. 5.3, 5.5).
"""

import collections
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple, Optional, Protocol

import numpy as np
import tensorflow_federated as tff

# Program states kept on disk (tff.program.FileProgramStateManager keeps the
# first one, version 0, as well).
CHECKPOINTS_TO_KEEP = 5


class CheckpointSteps(Protocol):
  """Files kept next to the program states: client states, a window's models.

  `prepare_checkpoint(t)` runs before the program state of round t is saved,
  `finish_checkpoint(t, kept_rounds)` after it, `close()` when the run ends.
  """

  def prepare_checkpoint(self, round_num: int) -> None:
    ...

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int]
  ) -> None:
    ...

  def close(self) -> None:
    ...


class _CombinedSteps:
  """The checkpoint steps of several parts, run in order."""

  def __init__(self, parts: Sequence[CheckpointSteps]):
    self._parts = tuple(parts)

  def prepare_checkpoint(self, round_num: int) -> None:
    for part in self._parts:
      part.prepare_checkpoint(round_num)

  def finish_checkpoint(
      self, round_num: int, kept_rounds: Collection[int]
  ) -> None:
    for part in self._parts:
      part.finish_checkpoint(round_num, kept_rounds)

  def close(self) -> None:
    for part in self._parts:
      part.close()


def combine_steps(
    *parts: Optional[CheckpointSteps],
) -> Optional[CheckpointSteps]:
  """One `CheckpointSteps` running those of `parts` (Nones skipped) in order."""
  present = [part for part in parts if part is not None]
  if not present:
    return None
  if len(present) == 1:
    return present[0]
  return _CombinedSteps(present)


class CheckpointMismatchError(ValueError):
  """The newest checkpoint was made by a run with other arguments."""


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
      store: Optional[CheckpointSteps],
  ) -> None:
    """Prepares `store`'s checkpoint, saves version t, finishes the store's.

    `store`: the client-state store, or any `CheckpointSteps`
    (`combine_steps`), or None.
    """
    if store is not None:
      store.prepare_checkpoint(round_num)
    self._run(
        self._manager.save(
            _program_state(state, round_num, self._identity), round_num
        )
    )
    if store is not None:
      kept = self._run(self._manager.get_versions()) or []
      store.finish_checkpoint(round_num, set(kept))

  def load_latest(
      self, initial_state: Any, *, total_rounds: int
  ) -> Optional[Restored]:
    """The newest program state, or None.

    Raises:
      CheckpointMismatchError: If it does not fit this run: another server
        state structure (algorithm, window, `--window_location`, model),
        seed, clients per round or population, or a round past
        `total_rounds`.
    """
    loaded, version = self._load(initial_state, self._manager.load_latest)
    if loaded is None:
      return None
    round_num = self._check(loaded, total_rounds=total_rounds)
    return Restored(loaded['server_state'], round_num, version)

  def load_version(self, initial_state: Any, version: int) -> Restored:
    """The program state of round `version` (e.g. a fork's round).

    Raises:
      CheckpointMismatchError: As `load_latest` (the round must be
        `version`).
      tff.program.ProgramStateNotFoundError: If that version is not kept.
    """

    async def load(structure):
      return await self._manager.load(version, structure), version

    loaded, _ = self._load(initial_state, load)
    round_num = self._check(loaded, total_rounds=version)
    return Restored(loaded['server_state'], round_num, version)

  def _load(self, initial_state: Any, load: Callable[[Any], Any]):
    """`run(load(structure))`, a structure mismatch as a one-line error."""
    structure = _program_state(initial_state, 0, RunIdentity(0, 0, 0))
    try:
      return self._run(load(structure))
    except (TypeError, ValueError) as e:
      # tf.nest's structure mismatch (its message prints both structures).
      if 'structure' not in str(e):
        raise
      raise CheckpointMismatchError(
          f'The checkpoint in {self.directory} holds a server state of '
          "another structure than this run's process (another algorithm, "
          'window, window location or model?); resume with the same '
          'arguments or use another `experiment_name`.'
      ) from None

  def _check(self, loaded: Mapping[str, Any], *, total_rounds: int) -> int:
    for key, argument in (
        ('seed', 'seed'),
        ('clients_per_round', 'clients_per_round'),
        ('num_clients', 'train_client_data'),
    ):
      value = getattr(self._identity, key)
      if int(loaded[key]) != value:
        raise CheckpointMismatchError(
            f'`{argument}` differs from the checkpoint in {self.directory}: '
            f'{key} is {value} now and {int(loaded[key])} there; resume with '
            'the same arguments or use another `experiment_name`.'
        )
    round_num = int(loaded['round_num'])
    if round_num > total_rounds:
      raise CheckpointMismatchError(
          f'`total_rounds` ({total_rounds}) is smaller than the round of the '
          f'newest checkpoint in {self.directory} ({round_num}).'
      )
    return round_num
