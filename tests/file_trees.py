"""Every file below a directory, for tests that a step wrote nothing."""

import os


def tree_bytes(directory) -> dict[str, bytes]:
  """Relative path -> bytes of every file below `directory`."""
  found = {}
  for parent, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(parent, name)
      with open(path, 'rb') as f:
        found[os.path.relpath(path, directory)] = f.read()
  return found
