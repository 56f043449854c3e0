"""A SCAFFOLD + WiMA run of tests/softmax_task.py that can SIGKILL itself.

Run by tests/training/loop_kill_test.py as a subprocess for the run that is
killed:

  python -m tests.training.kill_driver OUTPUT_DIR KIND KILL_AT

and in the test's own process (`run`, on the test session's TFF worker) for
the uninterrupted reference runs and for the resumes, which only need to
end where the uninterrupted run ends.

KIND is the client-state store, `memory` or `disk`, with the window in the
process state, or `program`: in-memory client states and the window kept by
the program (`ProgramWindowRunner`, its models in files).

It runs (or resumes) `run_training` for `TOTAL_ROUNDS` rounds. Every durable
file step (`os.fsync`, `os.rename`, `os.replace`, `os.pwrite`, `os.remove`,
`os.truncate`, `shutil.rmtree`, `tf.io.gfile.rename`) and the start of every
round is an event; with KILL_AT = i >= 0 the process sends itself SIGKILL
just before event i, with KILL_AT = -1 it runs to the end, writes the events
to `events.json` and the final model and every client's state to
`final.npz`.
"""

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import sys

from tff_fedwin import log_levels

log_levels.quiet_native_logs(['kill_driver'])  # Before TensorFlow is imported.

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from tests import softmax_task as task  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import aggregators  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import algorithms  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import runtime  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import training  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin.algorithms import runners  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin.algorithms import scaffold  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin.training import checkpoints as checkpoints_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin.training import client_state_stores  # pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin.training import disk_client_states  # pylint: disable=g-import-not-at-top,wrong-import-position

TOTAL_ROUNDS = 5
ROUNDS_PER_CHECKPOINT = 2
EXPERIMENT = 'exp'


class _Events:
  """Counts events; kills this process before event `kill_at`."""

  def __init__(self, kill_at: int):
    self.kill_at = kill_at
    self.names = []

  def __call__(self, name: str) -> None:
    if len(self.names) == self.kill_at:
      os.kill(os.getpid(), signal.SIGKILL)
    self.names.append(name)


def _path_of_fd(fd):
  try:
    return os.path.basename(os.readlink(f'/proc/self/fd/{fd}'))
  except OSError:
    return '?'


@contextlib.contextmanager
def _instrumented(events: _Events):
  """Wraps the file steps so that each one is an event first; restores them."""
  originals = []

  def wrap(owner, name, describe):
    original = getattr(owner, name)
    originals.append((owner, name, original))

    def wrapped(*args, **kwargs):
      events(f'{name} {describe(*args)}')
      return original(*args, **kwargs)

    setattr(owner, name, wrapped)

  base = lambda *a: os.path.basename(os.fspath(a[0]))
  # The disk store merges at every checkpoint, so that its merge's file
  # steps are events too.
  originals.append(
      (disk_client_states, 'MERGE_AT', disk_client_states.MERGE_AT)
  )
  disk_client_states.MERGE_AT = 0
  try:
    wrap(os, 'fsync', lambda fd, *_: _path_of_fd(fd))
    wrap(os, 'pwrite', lambda fd, *_: _path_of_fd(fd))
    wrap(os, 'rename', base)
    wrap(os, 'replace', base)
    wrap(os, 'remove', base)
    wrap(os, 'truncate', base)
    wrap(shutil, 'rmtree', base)
    wrap(tf.io.gfile, 'rename', base)
    yield
  finally:
    for owner, name, original in reversed(originals):
      setattr(owner, name, original)


@functools.cache
def _scaffold_process(window_size, files: bool):
  """One SCAFFOLD process per configuration in a process (built once)."""
  return scaffold.build_scaffold(
      task.model_fn,
      client_learning_rate=0.2,
      total_clients=task.NUM_CLIENTS,
      window_size=window_size,
      client_state_transfer='files' if files else 'values',
  )


class _Runner(runners.ScaffoldRunner):
  """A ScaffoldRunner whose rounds are events."""

  def __init__(
      self,
      events: _Events,
      window_size=2,
      state_files_dir=None,
      server_state_dir=None,
  ):
    super().__init__(
        _scaffold_process(window_size, bool(state_files_dir)),
        scaffold.initial_client_state(task.model_fn),
        state_files_dir=state_files_dir,
        server_state_dir=server_state_dir,
    )
    self._events = events

  def run_round(self, state, datasets, client_states):
    self._events('round')
    return super().run_round(state, datasets, client_states)


def _build_runner(events: _Events, kind: str, output_dir: str):
  """Window in the state (`memory`, `disk`) or kept by the program.

  `disk` also moves the round's client states as files
  (`client_state_transfer='files'`, in `output_dir/state_files`); the
  others as TFF values. `disk` and `program` keep the server state in files
  between rounds (`output_dir/server_state`), `memory` sends it as values.

  The program's window carries an extra window (W = 1, evaluated only, sec.
  1.11 of docs/design.md): its running sum must resume exactly too, and its
  files are those of the main window (the largest, W = 2), so the kill
  points' file names hold.
  """
  if kind == 'disk':
    return _Runner(
        events,
        state_files_dir=os.path.join(output_dir, 'state_files'),
        server_state_dir=os.path.join(output_dir, 'server_state'),
    )
  if kind != 'program':
    return _Runner(events)
  return algorithms.ProgramWindowRunner(
      _Runner(
          events,
          window_size=None,
          server_state_dir=os.path.join(output_dir, 'server_state'),
      ),
      aggregators.ProgramWindow(window_size=2, extra_window_sizes=(1,)),
  )


def _client_states(kind: str) -> str:
  return 'memory' if kind == 'program' else kind


def _final_server_state(output_dir, runner):
  """The server state of the newest checkpoint (round T)."""
  loop = asyncio.new_event_loop()
  try:
    checkpoints = checkpoints_lib.Checkpoints(
        os.path.join(output_dir, EXPERIMENT, 'checkpoints'),
        identity=checkpoints_lib.RunIdentity(
            seed=5, clients_per_round=2, num_clients=task.NUM_CLIENTS
        ),
        run=loop.run_until_complete,
    )
    restored = checkpoints.load_latest(
        runner.initialize(), total_rounds=TOTAL_ROUNDS
    )
  finally:
    loop.close()
  assert restored.round_num == TOTAL_ROUNDS, restored.round_num
  return restored.server_state


def _write_final(output_dir, runner, client_states, kind):
  """The final global and window models and every client's state."""
  arrays = {}
  state = _final_server_state(output_dir, runner)
  weights = [
      runner.global_model_weights(state),
      runner.window_model_weights(state),
  ]
  if kind == 'program':
    weights += list(runner.extra_window_models(state).values())
    # Every window's running sum, whether or not its model is read.
    weights += [state.window.window_sum, *state.window.extra_sums]
  for i, leaf in enumerate(tf.nest.flatten(weights)):
    arrays[f'model_{i}'] = np.asarray(leaf)
  store = client_state_stores.open_client_states(
      client_states,
      scaffold.initial_client_state(task.model_fn),
      task.CLIENT_IDS,
      checkpoint_dir=os.path.join(output_dir, EXPERIMENT, 'checkpoints'),
      round_num=TOTAL_ROUNDS,
  )
  try:
    states = store.get(task.CLIENT_IDS)
  finally:
    store.close()
  for i, leaf in enumerate(tf.nest.flatten(states)):
    arrays[f'client_state_{i}'] = np.asarray(leaf)
  np.savez(os.path.join(output_dir, 'final.npz'), **arrays)


def run(output_dir: str, kind: str, kill_at: int = -1) -> list[str]:
  """Runs (or resumes) the run in the current TFF context; its events.

  With `kill_at` >= 0 this process is SIGKILLed before event `kill_at`
  (only for a process of its own: `main`). At the end the final models and
  client states are in `output_dir/final.npz`, the events in
  `output_dir/events.json`; the file steps are restored on return.
  """
  events = _Events(kill_at)
  client_states = _client_states(kind)
  runner = _build_runner(events, kind, output_dir)
  with _instrumented(events):
    training.run_training(
        runner,
        train_client_data=task.CLIENT_DATA,
        preprocess_fn=task.preprocess_fn,
        clients_per_round=2,
        total_rounds=TOTAL_ROUNDS,
        seed=5,
        evaluate_fn=task.evaluate_fn,
        rounds_per_eval=1,
        rounds_per_checkpoint=ROUNDS_PER_CHECKPOINT,
        output_dir=output_dir,
        experiment_name=EXPERIMENT,
        client_states=client_states,
    )
    _write_final(output_dir, runner, client_states, kind)
  with open(os.path.join(output_dir, 'events.json'), 'w') as f:
    json.dump(events.names, f)
  return events.names


def main(output_dir: str, kind: str, kill_at: int) -> None:
  with runtime.local_execution_context(
      log_dir=os.path.join(output_dir, 'workers')
  ):
    run(output_dir, kind, kill_at)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
