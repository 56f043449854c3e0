"""A full disk as users meet it: a small tmpfs the test mounts (root only)."""

import os
import subprocess

import pytest


@pytest.fixture
def tmpfs(tmp_path):
  """A 4 MB tmpfs at tmp_path/mnt, unmounted afterwards (else skipped)."""
  mount_point = tmp_path / 'mnt'
  mount_point.mkdir()
  result = subprocess.run(
      ['mount', '-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', str(mount_point)],
      capture_output=True,
      text=True,
      check=False,
  )
  if result.returncode != 0:
    pytest.skip(f'cannot mount a tmpfs: {result.stderr.strip()}')
  try:
    yield mount_point
  finally:
    # A failed test may leave a file open in it: then detach it (lazy).
    if subprocess.run(['umount', str(mount_point)], check=False).returncode:
      subprocess.run(['umount', '-l', str(mount_point)], check=False)


def fill(directory, leave_bytes):
  """A filler file leaving `leave_bytes` free on `directory`'s file system."""
  stat = os.statvfs(directory)
  free = stat.f_bavail * stat.f_frsize
  path = os.path.join(directory, 'filler')
  with open(path, 'wb') as f:
    f.write(b'\1' * max(free - leave_bytes, 0))
  return path
