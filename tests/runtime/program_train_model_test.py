"""`tff.learning.programs.train_model` on our window processes (issue 45).

tests/runtime/program_driver.py runs the program (4 rounds, W = 3, 3 of the 5
clients per round, drawn from (seed, round)) in `local_federated_context`.
Expected values are numpy: the window model is the mean of the last 3 global
models read from TFF's own saved program states, and the evaluation's loss is
the softmax cross-entropy of that mean model over the 40 examples, in float64.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tests.runtime import processes
from tests.runtime import program_driver as driver
from tff_fedwin import runtime
from tff_fedwin import training
from tff_fedwin.aggregators import window_model_weights

ROUNDS = 4
_FINAL_KEY = f'training_checkpoint_round_{ROUNDS}'
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Both algorithms run uninterrupted: {algorithm: (root_dir, memory)}."""
  results = {}
  with runtime.local_federated_context():
    for algorithm in driver.ALGORITHMS:
      root = str(tmp_path_factory.mktemp(algorithm))
      results[algorithm] = (
          root,
          asyncio.run(driver.run_program(root, algorithm, ROUNDS)),
      )
  return results


def _saved_states(root, template):
  """{version: train state} from the run's FileProgramStateManager."""
  manager = tff.program.FileProgramStateManager(os.path.join(root, 'state'))
  structure = tff.learning.programs.ProgramState(
      template,
      0,
      0,
      training.SeededClientIdDataSource(task.CLIENT_IDS).iterator(),
  )

  async def load_all():
    versions = await manager.get_versions()
    return {v: (await manager.load(v, structure)).state for v in versions}

  return asyncio.run(load_all())


def _released_leaves(root):
  """The leaves of the last train state in the SavedModel file release."""
  manager = tff.program.SavedModelFileReleaseManager(
      os.path.join(root, 'model')
  )
  value = asyncio.run(manager.get_value(_FINAL_KEY))
  return [np.asarray(v) for v in tf.nest.flatten(value)]


def _numpy_loss(trainable):
  """Mean softmax cross-entropy over all 40 training examples (float64)."""
  kernel, bias = (np.asarray(w, np.float64) for w in trainable)
  logits = task.TRAIN_X.astype(np.float64) @ kernel + bias
  log_norm = np.log(np.sum(np.exp(logits), axis=1))
  return np.mean(log_norm - logits[np.arange(len(task.TRAIN_Y)), task.TRAIN_Y])


def _rounds_log(root):
  with open(os.path.join(root, driver.ROUNDS_LOG)) as f:
    return [json.loads(line) for line in f]


@pytest.mark.parametrize('algorithm', driver.ALGORITHMS)
def test_train_model_window_is_numpy_mean_and_is_evaluated(runs, algorithm):
  root, memory = runs[algorithm]
  released = memory['model'].values()
  assert list(released) == [_FINAL_KEY]  # train_model: last round only.
  final_state = released[_FINAL_KEY]
  states = _saved_states(root, final_state)
  assert sorted(states) == list(range(ROUNDS + 1))
  globals_ = [
      task.leaves(states[t].global_model_weights.trainable)
      for t in range(ROUNDS + 1)
  ]
  # The rounds moved the model: a window equal to w^t would prove nothing.
  assert not np.allclose(globals_[ROUNDS][0], globals_[ROUNDS - 1][0])
  expected = [
      np.mean([g[i] for g in globals_[-driver.WINDOW_SIZE :]], axis=0)
      for i in range(2)
  ]
  window = task.leaves(window_model_weights(final_state).trainable)
  for got, want in zip(window, expected):
    np.testing.assert_allclose(got, want, atol=1e-6)
  # The file release holds the same state as the memory one, bit for bit.
  for got, want in zip(_released_leaves(root), task.leaves(final_state)):
    np.testing.assert_array_equal(got, want)
  ((eval_round, metrics),) = memory['eval'].values().items()
  assert eval_round == ROUNDS
  assert metrics['model_metrics']['num_examples'] == 40
  np.testing.assert_allclose(
      metrics['model_metrics']['loss'], _numpy_loss(expected), rtol=1e-5
  )
  assert [r['key'] for r in _rounds_log(root)] == list(range(1, ROUNDS + 1))


def _wait_for(path, process, timeout_seconds):
  deadline = time.monotonic() + timeout_seconds
  while not os.path.exists(path):
    assert process.poll() is None, f'driver exited with {process.returncode}'
    assert time.monotonic() < deadline, f'{path} not written in time'
    time.sleep(0.1)


def test_killed_program_resumes_from_tff_state_manager(runs, tmp_path):
  root = str(tmp_path / 'run')
  command = [sys.executable, '-m', 'tests.runtime.program_driver', root]
  command += ['fed_win', str(ROUNDS)]
  with open(tmp_path / 'driver.log', 'ab') as log:
    # Paused in round 3 after round 2's state is saved, then SIGKILLed.
    first = subprocess.Popen(
        command + ['2'], cwd=_REPO_ROOT, stdout=log, stderr=log
    )
    try:
      _wait_for(os.path.join(root, 'paused'), first, 240)
      first.send_signal(signal.SIGKILL)
      first.wait(timeout=10)
    finally:
      if first.poll() is None:
        first.kill()
        first.wait()
    second = subprocess.run(
        command, cwd=_REPO_ROOT, stdout=log, stderr=log, timeout=240
    )
  output = (tmp_path / 'driver.log').read_text(errors='replace')[-3000:]
  assert first.returncode == -signal.SIGKILL
  assert second.returncode == 0, output
  with open(os.path.join(root, 'paused')) as f:
    assert f.read() == 'True'  # Round 2's state was on disk at the kill.
  lines = _rounds_log(root)
  starts = [i for i, line in enumerate(lines) if 'start' in line]
  assert len(starts) == 2
  # The killed driver's worker died with it (PR_SET_PDEATHSIG).
  assert processes.wait_until_dead(lines[0]['worker'], timeout_seconds=10)
  # Round 3 ran before the kill but was not saved: the restart loads round
  # 2's state from the FileProgramStateManager and runs rounds 3 and 4 only.
  assert [line['key'] for line in lines[starts[1] + 1 :]] == [3, 4]
  # The same final state as the uninterrupted run, to the bit: the data
  # source's iterator, restored from round 2's program state, draws rounds 3
  # and 4's clients in the uninterrupted run's order (from (seed, round)), so
  # every float32 sum adds the same values in the same order.
  uninterrupted_root, _ = runs['fed_win']
  for got, want in zip(
      _released_leaves(root), _released_leaves(uninterrupted_root)
  ):
    np.testing.assert_array_equal(got, want, strict=True)
