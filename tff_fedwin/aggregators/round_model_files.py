"""One file per round's model, for the window kept by the program.

`RoundModelFiles` keeps w^t in `round_<t>.bin` (the leaves' raw bytes, in
`tf.nest.flatten` order) in a directory of the run's checkpoints, so the
window's W models live on disk, not in RAM or in the process state
(docs/design.md sec. 1.10). A file is written to a temporary name and renamed,
so it is there whole or not at all; a checkpoint fsyncs the files written
since the previous one; files no checkpoint can need any more are deleted
after the checkpoint that makes them so.
"""

import os
import re
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tff_fedwin import errors

_ROUND_PATTERN = re.compile(r'^round_(\d+)\.bin$')
_TEMPORARY_PATTERN = re.compile(r'^\.round_\d+\.bin\.tmp$')


class WindowFilesError(errors.RunDirectoryError, ValueError):
  """The window's directory cannot be used (the message says why)."""


class MissingWindowModelsError(WindowFilesError, FileNotFoundError):
  """A checkpoint's window models are not in the window directory."""


class RoundModelFiles:
  """Round t's model w^t in `<directory>/round_<t>.bin`.

  Usage (`open` at the start of a run; `prepare_checkpoint` before each
  program state is saved):

    files = RoundModelFiles(template)
    files.open(directory, round_num=None)  # or the restored round
    files.write(t, trainable)
    trainable = files.read(t)
    files.prepare_checkpoint(t)
    files.delete_through(t - window_size)
  """

  def __init__(self, template: Any):
    """Initializes the files of models shaped like `template`.

    Args:
      template: A structure of numpy arrays (the trainable weights).
    """
    leaves = [np.asarray(x) for x in tf.nest.flatten(template)]
    self._template = template
    self._dtypes = [x.dtype for x in leaves]
    self._shapes = [x.shape for x in leaves]
    self._nbytes = [x.nbytes for x in leaves]
    self._directory = None
    self._unsynced = []

  def path(self, round_num: int) -> str:
    return os.path.join(self._directory, f'round_{round_num}.bin')

  def _rounds(self) -> list[int]:
    return sorted(
        int(m.group(1))
        for m in map(_ROUND_PATTERN.match, os.listdir(self._directory))
        if m
    )

  def open(
      self,
      directory: str,
      round_num: Optional[int],
      needed_rounds: Sequence[int] = (),
  ) -> None:
    """Uses `directory` from round `round_num` on (None: a fresh run).

    Deletes the files of rounds after `round_num` (all of them for a fresh
    run: rounds a stopped run did after its last checkpoint are run again)
    and left-over temporary files.

    Raises:
      WindowFilesError: If `directory` holds files other than round models.
      MissingWindowModelsError: If a file of `needed_rounds` is missing or
        has the wrong size.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    names = os.listdir(directory)
    foreign = sorted(
        n
        for n in names
        if not (_ROUND_PATTERN.match(n) or _TEMPORARY_PATTERN.match(n))
    )
    if foreign:
      raise WindowFilesError(
          f'The window directory {directory} holds files that are not round '
          f'models: {foreign[:5]}; use an empty or new directory.'
      )
    self._directory = directory
    last = 0 if round_num is None else round_num
    for name in names:
      match = _ROUND_PATTERN.match(name)
      if _TEMPORARY_PATTERN.match(name) or int(match.group(1)) > last:
        os.remove(os.path.join(directory, name))
    size = sum(self._nbytes)
    for needed in needed_rounds:
      path = self.path(needed)
      if not os.path.exists(path) or os.path.getsize(path) != size:
        raise MissingWindowModelsError(
            f'The window model of round {needed}, needed to resume from the '
            f'checkpoint of round {round_num}, is missing or has another '
            f'size in {directory} (expected {size} bytes).'
        )

  def write(self, round_num: int, model: Any) -> None:
    """Writes w^t (a structure like the template) as round t's file."""
    leaves = tf.nest.flatten(model)
    path = self.path(round_num)
    temporary = os.path.join(self._directory, f'.round_{round_num}.bin.tmp')
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
      for leaf, dtype, shape in zip(leaves, self._dtypes, self._shapes):
        array = np.ascontiguousarray(leaf, dtype=dtype)
        if array.shape != shape:
          raise ValueError(
              f'`model` has a leaf of shape {array.shape}, the window holds '
              f'{shape}.'
          )
        view = memoryview(array).cast('B')
        while view:
          view = view[os.write(fd, view) :]
    finally:
      os.close(fd)
    os.replace(temporary, path)
    self._unsynced.append(path)

  def read(self, round_num: int) -> Any:
    """Round t's model, a structure like the template."""
    with open(self.path(round_num), 'rb') as f:
      data = f.read()
    leaves, offset = [], 0
    for dtype, shape, nbytes in zip(self._dtypes, self._shapes, self._nbytes):
      leaf = np.frombuffer(
          data, dtype, count=nbytes // dtype.itemsize, offset=offset
      )
      leaves.append(leaf.reshape(shape))
      offset += nbytes
    return tf.nest.pack_sequence_as(self._template, leaves)

  def prepare_checkpoint(self, round_num: int) -> None:
    """Makes the files written since the last checkpoint durable (fsync)."""
    del round_num  # Every file written so far is up to round t.
    for path in self._unsynced:
      fd = os.open(path, os.O_RDONLY)
      try:
        os.fsync(fd)
      finally:
        os.close(fd)
    if self._unsynced:
      fd = os.open(self._directory, os.O_RDONLY)
      try:
        os.fsync(fd)
      finally:
        os.close(fd)
    self._unsynced = []

  def delete_through(self, round_num: int) -> None:
    """Deletes the files of rounds <= `round_num`."""
    for old in self._rounds():
      if old <= round_num:
        os.remove(self.path(old))

  def close(self) -> None:
    self._directory = None
