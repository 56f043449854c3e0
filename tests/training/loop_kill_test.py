"""A run SIGKILLed at any step resumes to the uninterrupted run's results.

Each case runs tests/training/kill_driver.py (SCAFFOLD + WiMA, 5 rounds,
checkpoints at 0, 2, 4, 5; the window in the state with either client-state
store (the disk store's runs move the client states as files), or kept by the
program) in a subprocess that kills itself with SIGKILL
just before one file step of a checkpoint or one step of a round, then runs
it again to the end, and compares the final global and window models, every
client's state and the metrics rows with an uninterrupted run, exactly.

Only the killed run needs a process of its own: the uninterrupted run (one
per kind, shared by its cases) and each resume run in this process
(`kill_driver.run`), on the test session's TFF worker, as a rerun by the
user would run in a new process on a new worker: nothing but the files on
disk passes from the killed run to the resume.

Kill points are named by the events of the uninterrupted run (the driver's
docstring): a tuple of patterns, each matched at or after the previous
match; the kill comes just before the last one's event.
"""

import csv
import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.training import kill_driver

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
_R3 = ('round', 'round', 'round')  # The start of round 3.
_CHECKPOINT_2 = ('round', 'round')  # Rounds 1 and 2 begun, then checkpoint 2.
_AFTER_STATE_2 = (r'rename program_state_2_',)
_AFTER_STATE_4 = (r'rename program_state_4_',)

KILL_POINTS = {
    'disk': {
        'round3-start': _R3,
        'round3-half-written-update': _R3 + (r'pwrite leaf_1',),
        # Mid-way through the driver's side of the state files (its round
        # 3 inputs half written, round 2's output indexes half removed).
        'round3-state-files': _R3 + (r'remove client1\.out\.index',),
        'ckpt2-syncing-pending': _CHECKPOINT_2 + (r'fsync leaf_0',),
        'ckpt2-index-not-in-place': _CHECKPOINT_2 + (r'replace \.index',),
        'ckpt2-before-segment-rename': _CHECKPOINT_2 + (r'rename pending',),
        'ckpt2-segment-no-program-state': _CHECKPOINT_2 + _AFTER_STATE_2,
        # The driver merges at every checkpoint: at 4, segments 0 and 2.
        'ckpt4-merge-not-recorded': _AFTER_STATE_4 + (r'replace \.base',),
        'ckpt4-merged-segment-left': _AFTER_STATE_4 + (r'rmtree segment_2',),
    },
    'memory': {
        'round3-start': _R3,
        'ckpt2-writing-snapshot': _CHECKPOINT_2 + (r'fsync \.client_states_2',),
        'ckpt2-snapshot-no-program-state': _CHECKPOINT_2 + _AFTER_STATE_2,
    },
    # The window kept by the program: one model file per round.
    'program': {
        'round3-model-not-renamed': _R3 + (r'replace \.round_3',),
        'ckpt2-syncing-window-models': _CHECKPOINT_2 + (r'fsync round_2',),
        'ckpt2-window-no-program-state': _CHECKPOINT_2 + _AFTER_STATE_2,
        # The program state is in place, its manifest (written last) not yet:
        # the version is incomplete and the resume falls back a version.
        'ckpt4-no-manifest': _AFTER_STATE_4 + (r'replace \.fedwin_manifest',),
        'last-ckpt-no-manifest': (
            r'rename program_state_5_',
            r'replace \.fedwin_manifest',
        ),
    },
}
CASES = [
    (kind, name) for kind, points in KILL_POINTS.items() for name in points
]


def _drive(output_dir, kind, kill_at):
  return subprocess.run(
      [sys.executable, '-m', 'tests.training.kill_driver']
      + [str(output_dir), kind, str(kill_at)],
      cwd=_REPO,
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
  )


def _kill_index(events, patterns):
  index = 0
  for pattern in patterns:
    while not re.match(pattern, events[index]):
      index += 1
    found, index = index, index + 1
  return found


def _rounds_to_rerun(events, kill_at):
  """Rounds the resume runs: those after the newest checkpoint whose
  manifest (the last file of a version) was in place before the kill.

  Checkpoints are written at round 0, every ROUNDS_PER_CHECKPOINT rounds and
  at the last round (0, 2, 4, 5), in that order.
  """
  total = kill_driver.TOTAL_ROUNDS
  checkpoint_rounds = list(
      range(0, total, kill_driver.ROUNDS_PER_CHECKPOINT)
  ) + [total]
  written = sum(
      1 for e in events[:kill_at] if e.startswith('replace .fedwin_manifest')
  )
  return total - checkpoint_rounds[written - 1]


def _rows(output_dir):
  with open(os.path.join(output_dir, 'exp', 'metrics.csv')) as f:
    return [
        {k: v for k, v in row.items() if not k.endswith('time_seconds')}
        for row in csv.DictReader(f)
    ]


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
  """kind -> (events, final arrays, rows) of an uninterrupted run."""
  runs = {}

  def get(kind):
    if kind not in runs:
      output_dir = tmp_path_factory.mktemp(f'uninterrupted_{kind}')
      events = kill_driver.run(str(output_dir), kind)
      with open(os.path.join(output_dir, 'events.json')) as f:
        assert json.load(f) == events
      with np.load(os.path.join(output_dir, 'final.npz')) as final:
        arrays = dict(final)
      runs[kind] = (events, arrays, _rows(output_dir))
    return runs[kind]

  return get


@pytest.mark.parametrize('kind, point', CASES)
def test_sigkilled_run_resumes_to_the_uninterrupted_result(
    uninterrupted, tmp_path, kind, point
):
  events, expected, expected_rows = uninterrupted(kind)
  kill_at = _kill_index(events, KILL_POINTS[kind][point])

  killed = _drive(tmp_path, kind, kill_at)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert not os.path.exists(tmp_path / 'final.npz')

  resumed_events = kill_driver.run(str(tmp_path), kind)

  assert resumed_events.count('round') == _rounds_to_rerun(events, kill_at)
  with np.load(tmp_path / 'final.npz') as final:
    assert sorted(final) == sorted(expected)
    for key in expected:
      np.testing.assert_array_equal(final[key], expected[key], err_msg=key)
  assert _rows(tmp_path) == expected_rows
