"""The files checkpointed beside a program state: client states, window models.

A checkpoint of round t runs `prepare_checkpoint(t)` of each part before the
program state is saved and `finish_checkpoint(t, kept)` after it
(`tff_fedwin.training.checkpoints.Checkpoints.save`).
"""

from collections.abc import Collection, Sequence
from typing import Any, Optional, Protocol


class CheckpointSteps(Protocol):
  """Files kept next to the program states: client states, a window's models.

  `prepare_checkpoint(t)` runs before the program state of round t is saved,
  `finish_checkpoint(t, kept_rounds)` after it, `close()` when the run ends.
  Optionally `checkpoint_files(t)`: group (`checkpoint_manifest.GROUPS`) ->
  the paths of the files version t needs, listed in its manifest.
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

  def checkpoint_files(self, round_num: int) -> dict[str, list[str]]:
    return checkpoint_files(self._parts, round_num)

  def close(self) -> None:
    for part in self._parts:
      part.close()


def checkpoint_files(
    parts: Sequence[Any], round_num: int
) -> dict[str, list[str]]:
  """The merged `checkpoint_files(t)` of those `parts` that have one."""
  groups: dict[str, list[str]] = {}
  for part in parts:
    method = getattr(part, 'checkpoint_files', None)
    if callable(method):
      for group, paths in method(round_num).items():
        groups.setdefault(group, []).extend(paths)
  return groups


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
