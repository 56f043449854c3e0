"""Rows of array files: positioned reads and writes, creation, fsync.

`DiskClientStateStore` keeps row i of a `[num_rows, *shape]` array at byte
offset i * (row bytes) of a flat file and moves rows with `pread`/`pwrite`,
which keep the process's RSS out of it (a `np.memmap` would not; see
`disk_client_states`).
"""

import os
from collections.abc import Sequence
from typing import Optional

import numpy as np


def byte_view(array: np.ndarray) -> memoryview:
  return memoryview(array.reshape(-1)).cast('B')


def pwrite(fd: int, array: np.ndarray, offset: int) -> None:
  view = byte_view(np.ascontiguousarray(array))
  while view:
    written = os.pwrite(fd, view, offset)
    view, offset = view[written:], offset + written


def pread(fd: int, like: np.ndarray, offset: int) -> np.ndarray:
  out = np.empty_like(like)
  view = byte_view(out)
  while view:
    read = os.preadv(fd, [view], offset)
    if read == 0:
      raise OSError(f'Client-state file ends before offset {offset}.')
    view, offset = view[read:], offset + read
  return out


def fsync_path(path: str) -> None:
  """fsync(2) of a file or a directory, opened read-only."""
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def open_leaf_files(
    paths: Sequence[str], sizes: Optional[Sequence[int]] = None
) -> list[int]:
  """Opens one file per leaf; with `sizes`, creates them sparse at that size."""
  flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if sizes is not None else 0)
  fds = [os.open(path, flags, 0o600) for path in paths]
  for fd, size in zip(fds, sizes or ()):
    os.ftruncate(fd, size)
  return fds


def sync_and_close(fds: Sequence[int], *, close: bool) -> None:
  for fd in fds:
    os.fsync(fd)
    if close:
      os.close(fd)
