"""A cap on what an `.npz`'s arrays may decompress to, read from its headers.

An `.npz` is a zip of `.npy` files: a few kilobytes of deflated zeros can
decompress to gigabytes, and a forged `.npy` header can make numpy allocate
any size before it reads a byte. `sources.load_npz` checks both from the
headers (`check_sizes`) before loading an array: the zip's sizes against a
cap (`--max_npz_bytes`; by default `NPZ_MEMORY_FRACTION` of the available
memory, `default_max_bytes`), each `.npy` header's array against its
member's size.
"""

import math
import os
from typing import Sequence
import zipfile

import numpy as np

from tff_fedwin import choices

NPZ_MEMORY_FRACTION = choices.NPZ_MEMORY_FRACTION
# What reading a member's header may raise on a broken archive.
READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, KeyError)


def default_max_bytes() -> int:
  """`NPZ_MEMORY_FRACTION` of the memory available now, in bytes.

  Linux's MemAvailable (`/proc/meminfo`), else the physical memory.
  """
  try:
    with open('/proc/meminfo') as f:
      fields = dict(line.split(':', 1) for line in f)
    available = int(fields['MemAvailable'].split()[0]) * 1024
  except (OSError, KeyError, ValueError, IndexError):
    available = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
  return int(available * NPZ_MEMORY_FRACTION)


def _too_large(path: str, key: str, size: int, max_bytes: int) -> ValueError:
  return ValueError(
      f'{key} in {path}: decompresses to {size:,} bytes (with the arrays '
      f'before it), beyond the cap of {max_bytes:,} bytes (--max_npz_bytes, '
      f"load_npz's max_bytes; by default {NPZ_MEMORY_FRACTION:g} of the "
      'available memory); raise it if the machine has the memory.'
  )


def _array_header(path, key, archive, member) -> tuple[tuple, np.dtype]:
  """The shape and dtype in the `.npy` header of `member`."""
  with archive.open(member) as f:
    try:
      version = np.lib.format.read_magic(f)
      # pylint: disable-next=protected-access
      shape, _, dtype = np.lib.format._read_array_header(f, version)
    except ValueError as e:
      raise ValueError(
          f"{key} in {path}: cannot read the array's .npy header "
          f"({' '.join(str(e).split())})."
      ) from None
  return shape, dtype


def check_sizes(
    path: str, archive: zipfile.ZipFile, keys: Sequence[str], max_bytes: int
) -> None:
  """Refuses `keys` of `archive` (an `.npz`) beyond `max_bytes`, unread.

  The zip's central directory gives each member's uncompressed size (what
  `zipfile` reads at most: a stream that decompresses further is cut and
  fails its CRC); the `.npy` header gives what numpy allocates, which must
  fit in the member.

  Raises:
    ValueError: Naming the file, the array and the cap.
  """
  names = set(archive.namelist())
  total = 0
  for key in keys:
    member = key + '.npy' if key + '.npy' in names else key
    size = archive.getinfo(member).file_size
    total += size
    if total > max_bytes:
      raise _too_large(path, key, total, max_bytes)
    shape, dtype = _array_header(path, key, archive, member)
    claimed = math.prod(shape) * dtype.itemsize
    # Object arrays: refused later (they need pickle, which is not allowed).
    if claimed > size and not dtype.hasobject:
      raise ValueError(
          f'{key} in {path}: its header claims {claimed:,} bytes of array '
          f'data, but the archive holds {size:,} for it (a damaged or forged '
          'file).'
      )
