"""Another process that holds or tries a directory's `run_lock`.

A small Python subprocess that loads run_lock.py by its path (stdlib only, so
it starts in well under a second): `hold` prints `held` and keeps the lock
until killed; `try` prints `took it`, or the one-line message of the lock's
error when another process holds it.
"""

import subprocess
import sys
import textwrap

from tff_fedwin.training import run_lock

_HOLDER = textwrap.dedent("""
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location('run_lock', sys.argv[1])
    run_lock = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_lock)
    if sys.argv[3] == 'hold':
      with run_lock.hold(sys.argv[2]):
        print('held', flush=True)
        time.sleep(600)
    else:
      try:
        with run_lock.hold(sys.argv[2]):
          print('took it', flush=True)
      except run_lock.RunDirectoryLockedError as e:
        print(e, flush=True)
""")


def command(directory, action: str) -> list[str]:
  """The subprocess's command line; `action` is 'hold' or 'try'."""
  return [
      sys.executable,
      '-c',
      _HOLDER,
      run_lock.__file__,
      str(directory),
      action,
  ]


def try_in_other_process(directory) -> str:
  """The line another process prints when it tries to take the lock."""
  return subprocess.run(
      command(directory, 'try'),
      capture_output=True,
      text=True,
      timeout=60,
      check=True,
  ).stdout.strip()


def start_holder(directory) -> subprocess.Popen:
  """A process holding `directory`'s lock (it has printed `held`)."""
  process = subprocess.Popen(
      command(directory, 'hold'), stdout=subprocess.PIPE, text=True
  )
  line = process.stdout.readline().strip()
  if line != 'held':
    process.kill()
    process.wait(timeout=30)
    process.stdout.close()
    raise AssertionError(f'the holder printed {line!r}, not held')
  return process
