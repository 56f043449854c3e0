"""Checkpoints of a run: program states, client-state steps, resume checks.

Round t's client states are made durable (`prepare_checkpoint`) before the
program state version t and finished after it, so a version on disk always
has its client states (docs/design.md secs. 5.3, 5.5).
"""

import collections
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Optional

from absl import logging
import numpy as np
import tensorflow_federated as tff

from tff_fedwin import errors
from tff_fedwin.training import checkpoint_manifest as manifest_lib
from tff_fedwin.training import checkpoint_steps
from tff_fedwin.training import client_state_stores
from tff_fedwin.training import load_damage
from tff_fedwin.training import metrics_rows

# Program states kept on disk (tff.program.FileProgramStateManager keeps the
# first one, version 0, as well).
CHECKPOINTS_TO_KEEP = 5


class CheckpointMismatchError(errors.RunDirectoryError, ValueError):
  """The newest checkpoint was made by a run with other arguments."""


class NoIntactCheckpointError(errors.RunDirectoryError, ValueError):
  """No checkpoint version of the run is intact (the message lists them)."""


class DiskFullError(errors.EnvironmentProblemError):
  """The disk filled while the run wrote a file (the message names it)."""


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
  completion (e.g. `asyncio.AbstractEventLoop.run_until_complete`). Every
  version gets a manifest, written last (`checkpoint_manifest`); a resume
  takes the newest intact version (docs/design.md sec. 5.3). A version
  vouches for `metrics_csv` and `per_client_csv` (the run's rows files, if
  given) and for the disk store in `client_states_dir` (default
  `<checkpoint_dir>/client_states`).
  """

  def __init__(
      self,
      checkpoint_dir: str,
      *,
      identity: RunIdentity,
      run: Callable[[Any], Any],
      metrics_csv: Optional[str] = None,
      per_client_csv: Optional[str] = None,
      client_states_dir: Optional[str] = None,
  ):
    self.directory = checkpoint_dir
    self._client_states_dir = client_state_stores.disk_directory(
        checkpoint_dir, client_states_dir
    )
    self._identity = identity
    self._run = run
    self._metrics_csv = metrics_csv
    self.per_client_csv = per_client_csv
    self._manager = tff.program.FileProgramStateManager(
        checkpoint_dir, keep_total=CHECKPOINTS_TO_KEEP
    )

  def save(
      self,
      state: Any,
      round_num: int,
      store: Optional[checkpoint_steps.CheckpointSteps],
  ) -> None:
    """Prepares `store`'s checkpoint, saves version t, finishes the store's.

    Then writes version t's manifest: until it is there, version t is
    incomplete. `store`: the client-state store, or any `CheckpointSteps`
    (`checkpoint_steps.combine_steps`), or None.
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
    manifest_lib.write(
        self.directory,
        round_num,
        checkpoint_steps.checkpoint_files([store], round_num),
        self._metrics_csv,
        self.per_client_csv,
    )

  def versions(self) -> list[int]:
    """The kept versions, ascending."""
    return sorted(self._run(self._manager.get_versions()) or [])

  def last_checkpoint_bytes(self) -> Optional[int]:
    """The size of the newest version with a manifest, or None."""
    for version in reversed(self.versions()):
      manifest, _ = manifest_lib.read(self.directory, version)
      if manifest is not None:
        return manifest_lib.listed_bytes(manifest, self._client_states_dir)
    return None

  def resume_round(self) -> Optional[int]:
    """The round a rerun resumes from (`checkpoint_manifest.resume_round`)."""
    return manifest_lib.resume_round(self.directory)

  def load_latest(
      self, initial_state: Any, *, total_rounds: int
  ) -> Optional[Restored]:
    """The newest intact program state, or None (`resume` without a store)."""
    restored, _ = self.resume(initial_state, total_rounds=total_rounds)
    return restored

  def resume(
      self,
      initial_state: Any,
      *,
      total_rounds: int,
      open_store: Optional[Callable[[int], Any]] = None,
  ) -> tuple[Optional[Restored], Any]:
    """The newest intact version and `open_store(t)` of it; (None, None).

    Walks the versions newest first. One is intact when its manifest lists
    it whole (the files; the disk store's segments back to its base, checked
    before `open_store(t)` changes the store, `disk_store_chain`) and its
    program state loads. Newer versions are moved to `<run dir>/damaged/`
    with a warning naming each and why, with what they need outside their
    directory (`set_aside`). The rows files are no version's damage:
    metrics.csv gets its rows 1..t back from the version's copy if it
    disagrees (else loses its rows after t), per_client_metrics.csv is cut
    back to its size at t (`metrics_rows.restore_rows`). Versions older than the oldest
    with a manifest were written before manifests existed: the newest that
    loads is used, with a warning that it is unverified.

    Raises:
      CheckpointMismatchError: As `_check`, or a structure mismatch.
      NoIntactCheckpointError: If no version is intact, or only version 0
        with newer ones damaged (nothing is moved).
      metrics_rows.RowsFileError: If a rows file disagrees with version t and cannot be
        restored from it (nothing is moved).
    """
    versions = self.versions()
    with_manifest = [
        v for v in versions if manifest_lib.has_manifest(self.directory, v)
    ]
    oldest_verified = min(with_manifest) if with_manifest else None
    problems, moved = [], 0
    for version in reversed(versions):
      legacy = oldest_verified is None or version < oldest_verified
      found, manifest, problem = self._try_version(
          initial_state, version, legacy, total_rounds
      )
      if found is not None:
        self._refuse_round_0(found, problems)
        metrics_rows.check_rows(
            manifest, self._metrics_csv, self.per_client_csv
        )
        manifest_lib.set_aside_versions(
            self.directory,
            self._client_states_dir,
            problems[moved:],
            found.round_num,
        )
        moved = len(problems)
        try:
          store = None if open_store is None else open_store(found.round_num)
        except (OSError, ValueError) as e:
          if not legacy or version == 0:
            raise
          problem = f'its client states cannot be restored ({e})'
        else:
          metrics_rows.restore_rows(
              manifest,
              found.round_num,
              self._metrics_csv,
              self.per_client_csv,
              self.directory,
          )
          if legacy:
            logging.warning(
                'The checkpoint of round %d in %s has no manifest (written '
                'before checkpoints were verified): resuming from it '
                'unverified.',
                found.round_num,
                self.directory,
            )
          return found, store
      problems.append((version, problem))
    if not problems:
      return None, None
    raise NoIntactCheckpointError(
        f'No checkpoint in {self.directory} is intact, so the run cannot '
        'resume: '
        + '; '.join(f'version {v}: {why}' for v, why in problems)
        + '. Restore a good copy of the run directory or use another '
        '`experiment_name`.'
    )

  def _try_version(self, initial_state, version, legacy, total_rounds):
    """(Restored, manifest, None) if `version` is intact, else (None, None,
    why). A legacy version has no manifest (None)."""
    manifest = None
    if not legacy:
      manifest, problem = manifest_lib.check_version(self.directory, version)
      if problem:
        return None, None, problem

    async def load(structure):
      return await self._manager.load(version, structure), version

    try:
      loaded, _ = self._load(initial_state, load)
    except CheckpointMismatchError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      if not load_damage.is_damage(e):
        raise  # Nothing moved: the machine failed, not this version's data.
      return (
          None,
          None,
          f'its program state cannot be read ({e})'.replace('\n', ' '),
      )
    round_num = self._check(loaded, total_rounds=total_rounds)
    if manifest is not None:
      # Verified before `open_store`, which deletes newer segments.
      problem = manifest_lib.check_store(
          manifest, round_num, self._client_states_dir
      )
      if problem:
        return None, None, problem
    return Restored(loaded['server_state'], round_num, version), manifest, None

  def _refuse_round_0(self, found: Restored, problems) -> None:
    """A fallback to round 0 past newer versions is the user's call."""
    if found.round_num == 0 and problems:
      raise NoIntactCheckpointError(
          f'Only the checkpoint of round 0 in {self.directory} is intact; '
          'the run would start over: '
          + '; '.join(f'version {v}: {why}' for v, why in problems)
          + '. Nothing was moved. Restore a good copy of the run directory, '
          f'or move {self.directory} aside to start the run again.'
      )

  def load_version(self, initial_state: Any, version: int) -> Restored:
    """The program state of round `version` (e.g. a fork's round), checked
    as a resume checks it (`checkpoint_manifest.check_version`) unless no
    version of the run has a manifest (written before manifests existed).

    Raises:
      CheckpointMismatchError: As `load_latest` (the round must be
        `version`).
      NoIntactCheckpointError: If that version is damaged or incomplete.
      tff.program.ProgramStateNotFoundError: If that version is not kept.
    """
    if any(
        manifest_lib.has_manifest(self.directory, v) for v in self.versions()
    ):
      _, problem = manifest_lib.check_version(self.directory, version)
      if problem:
        raise NoIntactCheckpointError(
            f'The checkpoint of round {version} in {self.directory} is '
            f'damaged or incomplete ({problem}); it cannot be used.'
        )

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
