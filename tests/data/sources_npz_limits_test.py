"""Tests for tff_fedwin.data.npz_limits: an `.npz` bomb is refused unread.

A few kilobytes of deflated zeros that decompress past the cap, and a forged
`.npy` header that claims more than its member holds, are one-line
ValueErrors naming the file, the array and `--max_npz_bytes`, raised before
numpy reads (or allocates) any array.
"""

import io
import os
import zipfile

import numpy as np
import pytest

from tff_fedwin import choices
from tff_fedwin.data import npz_limits
from tff_fedwin.data import sources

_SMALL = dict(
    y_train=np.zeros(4, np.int64),
    x_test=np.zeros((2, 8), np.uint8),
    y_test=np.zeros(2, np.int64),
)


def _no_reading(*args, **kwargs):
  raise AssertionError('an array was read')


@pytest.fixture
def unread(monkeypatch):
  """No array may be read (nor allocated) past this point."""
  monkeypatch.setattr(np.lib.format, 'read_array', _no_reading)


def test_bomb_beyond_the_cap_is_refused_unread(tmp_path, unread):
  path = str(tmp_path / 'bomb.npz')
  np.savez_compressed(path, x_train=np.zeros((4, 2**18), np.uint8), **_SMALL)
  assert os.path.getsize(path) < 10_000  # 1 MiB of x_train.
  with pytest.raises(ValueError) as raised:
    sources.load_npz(path, max_bytes=2**16)
  message = str(raised.value)
  assert '\n' not in message
  assert message.startswith(
      f'x_train in {path}: decompresses to 1,048,704 bytes'
  )
  assert 'beyond the cap of 65,536 bytes (--max_npz_bytes' in message


def test_cap_by_default_is_a_fraction_of_the_available_memory(
    tmp_path, monkeypatch, unread
):
  physical = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
  cap = npz_limits.default_max_bytes()
  assert 0 < cap <= choices.NPZ_MEMORY_FRACTION * physical
  monkeypatch.setattr(npz_limits, 'default_max_bytes', lambda: 100)
  path = str(tmp_path / 'data.npz')
  np.savez(path, x_train=np.zeros((4, 8), np.uint8), **_SMALL)
  with pytest.raises(ValueError, match='beyond the cap of 100 bytes'):
    sources.load_npz(path)


def _npy_header(shape, descr='<f4') -> bytes:
  buffer = io.BytesIO()
  np.lib.format.write_array_header_1_0(
      buffer, {'descr': descr, 'fortran_order': False, 'shape': shape}
  )
  return buffer.getvalue()


def test_forged_npy_header_is_refused_before_allocating(tmp_path, unread):
  # x_train.npy claims 4 TB of float32 in a member of a few hundred bytes.
  path = str(tmp_path / 'forged.npz')
  np.savez(path, **_SMALL)
  with zipfile.ZipFile(path, 'a') as archive:
    archive.writestr('x_train.npy', _npy_header((10**12,)) + b'\0' * 64)
  with pytest.raises(ValueError) as raised:
    sources.load_npz(path)
  assert str(raised.value).startswith(
      f'x_train in {path}: its header claims 4,000,000,000,000 bytes of '
      'array data, but the archive holds'
  )


def test_arrays_within_the_cap_load(tmp_path):
  path = str(tmp_path / 'data.npz')
  np.savez(path, x_train=np.full((4, 8), 255, np.uint8), **_SMALL)
  size = sum(i.file_size for i in zipfile.ZipFile(path).infolist())
  (x_train, _), _ = sources.load_npz(path, max_bytes=size)
  np.testing.assert_array_equal(x_train, np.ones((4, 8), np.float32))
