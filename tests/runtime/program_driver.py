"""A small federated program: `train_model` on the softmax task (tests).

`run_program` runs `tff.learning.programs.train_model` in the installed
federated context on tests/softmax_task.py's 5 clients, fed by client ids
(`training.SeededClientIdDataSource`: each round's ids, in their order, from
(SEED, round) alone; the task's dataset computation composed into the
process), with a `tff.program.FileProgramStateManager` under
`ROOT/state`, the train state released to `ROOT/model`
(`tff.program.SavedModelFileReleaseManager`) and to memory, each round's train
metrics appended to `ROOT/rounds.jsonl`, and an `EvaluationManager` that
evaluates the window model (the process's `get_model_weights`).

As a program, for the kill/restart test:

  python -m tests.runtime.program_driver ROOT ALGORITHM ROUNDS [PAUSE_AFTER]

runs it in `tff_fedwin.runtime.local_federated_context()`, after appending
`{"start": pid, "worker": worker_pid}` to `ROOT/rounds.jsonl`. With
PAUSE_AFTER = k it stops in round k + 1, after its training computation and
before its state is saved, once round k's state is on disk: it writes
`ROOT/paused` and sleeps (the test then kills it). A kill between an
evaluation's start and the save of that round's state makes TFF 0.87's
restart fail (`ProgramStateExistsError` for the evaluation), so the test
kills at a known point instead of at a random one.
"""

import asyncio
import datetime
import json
import os
import sys
import time
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin import runtime
from tff_fedwin import training
from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators import WindowedModelAveragingFactory
from tff_fedwin.algorithms import fed_win

WINDOW_SIZE = 3
CLIENT_LR = 0.5
ALGORITHMS = ('fed_win', 'tff_fed_avg')
ROUNDS_LOG = 'rounds.jsonl'
SEED = 0  # Of the data sources' selections.
# Of the 5: which 3 train depends on the source, so a restart that drew
# others (TFF's unseeded ClientIdDataSource) would end elsewhere.
CLIENTS_PER_ROUND = 3


def _with_window_get_model_weights(
    process: tff.learning.templates.LearningProcess,
) -> tff.learning.templates.LearningProcess:
  """TFF's process, `get_model_weights` giving the factory's window model.

  The aggregator's window holds positions relative to w^0 and `position` is
  w^t's; the window model is w^t + (mean - position) when the window is read,
  else w^t (`window_math.evaluated_trainable` picks mean or position).
  """
  state_type = process.initialize.type_signature.result.member

  @tff.tensorflow.computation(state_type)
  def get_model_weights(state):
    window_state = state.aggregator
    read = window_math.evaluated_trainable(
        window_state.window, window_state.position
    )
    trainable = tf.nest.map_structure(
        lambda w, m, p: w + (m - p),
        state.global_model_weights.trainable,
        read,
        window_state.position,
    )
    return tff.learning.models.ModelWeights(
        trainable, state.global_model_weights.non_trainable
    )

  return tff.learning.templates.LearningProcess(
      process.initialize,
      process.next,
      get_model_weights,
      process.set_model_weights,
      get_hparams_fn=process.get_hparams,
      set_hparams_fn=process.set_hparams,
  )


def dataset_computation() -> tff.Computation:
  """`tf.string -> B*`: a client's batched dataset, built from its id."""
  return task.CLIENT_DATA.preprocess(task.preprocess_fn).dataset_computation


def build_process(algorithm: str) -> tff.learning.templates.LearningProcess:
  """The window process, over datasets (not yet over client ids).

  Args:
    algorithm: `'fed_win'` (`build_fed_win`, W = 3) or `'tff_fed_avg'`
      (TFF's `build_weighted_fed_avg` with `WindowedModelAveragingFactory(3)`);
      client SGD(0.5), server SGD(1.0) for both.
  """
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=CLIENT_LR)
  if algorithm == 'fed_win':
    return fed_win.build_fed_win(task.model_fn, sgd, window_size=WINDOW_SIZE)
  if algorithm == 'tff_fed_avg':
    return _with_window_get_model_weights(
        tff.learning.algorithms.build_weighted_fed_avg(
            task.model_fn,
            sgd,
            model_aggregator=WindowedModelAveragingFactory(WINDOW_SIZE),
        )
    )
  raise ValueError(f'algorithm must be one of {ALGORITHMS}, got {algorithm!r}')


class RoundLog(tff.program.ReleaseManager):
  """Appends each release as a JSON line `{"key": k, "loss": ...}`."""

  def __init__(self, path: str):
    self._path = path

  async def release(self, value: Any, key: Any) -> None:
    value = await tff.program.materialize_value(value)
    flat = tf.nest.flatten(value)
    line = {'key': int(key), 'values': [float(np.asarray(v)) for v in flat]}
    with open(self._path, 'a') as f:
      f.write(json.dumps(line) + '\n')


def _evaluation_manager(root_dir: str, eval_metrics):
  """An `EvaluationManager`: one evaluation round on all 5 clients per call."""
  eval_process = (
      tff.simulation.compose_dataset_computation_with_learning_process(
          dataset_computation(),
          tff.learning.algorithms.build_fed_eval(task.model_fn),
      )
  )

  def create_state_manager(name):
    return tff.program.FileProgramStateManager(
        os.path.join(root_dir, 'eval', name)
    )

  return tff.learning.programs.EvaluationManager(
      data_source=training.SeededClientIdDataSource(task.CLIENT_IDS, seed=SEED),
      aggregated_metrics_manager=eval_metrics,
      create_state_manager_fn=create_state_manager,
      create_process_fn=lambda name: (eval_process, None),
      cohort_size=task.NUM_CLIENTS,
      duration=datetime.timedelta(0),
  )


def _pause_after(root_dir: str, round_num: int):
  """`should_discard_round` that blocks in round `round_num + 1` (see top)."""
  rounds_done = []
  saved = os.path.join(root_dir, 'state', f'program_state_{round_num}')

  def should_discard_round(unused_train_result) -> bool:
    rounds_done.append(1)
    if len(rounds_done) == round_num + 1:
      deadline = time.monotonic() + 60
      # Round k's save runs in an executor thread: it finishes meanwhile.
      while not os.path.exists(saved) and time.monotonic() < deadline:
        time.sleep(0.05)
      with open(os.path.join(root_dir, 'paused'), 'w') as f:
        f.write(str(os.path.exists(saved)))
      time.sleep(3600)
    return False

  return should_discard_round


async def run_program(
    root_dir: str,
    algorithm: str,
    total_rounds: int,
    pause_after: Optional[int] = None,
) -> dict[str, tff.program.MemoryReleaseManager]:
  """Runs `train_model` in the installed federated context.

  Every round trains CLIENTS_PER_ROUND of the 5 clients (which, and in what
  order, from (SEED, round)); the last round is evaluated and its state
  released. `pause_after`: see the module docstring.

  Returns:
    `{'model': ..., 'eval': ...}`: the memory release managers of the train
    state and of the evaluation's aggregated metrics.
  """
  process = tff.simulation.compose_dataset_computation_with_learning_process(
      dataset_computation(), build_process(algorithm)
  )
  memory = {
      'model': tff.program.MemoryReleaseManager(),
      'eval': tff.program.MemoryReleaseManager(),
  }
  await tff.learning.programs.train_model(
      train_process=process,
      train_data_source=training.SeededClientIdDataSource(
          task.CLIENT_IDS, seed=SEED
      ),
      train_per_round_clients=CLIENTS_PER_ROUND,
      train_total_rounds=total_rounds,
      should_discard_round=(
          None if pause_after is None else _pause_after(root_dir, pause_after)
      ),
      program_state_manager=tff.program.FileProgramStateManager(
          os.path.join(root_dir, 'state')
      ),
      model_output_manager=tff.program.GroupingReleaseManager(
          [
              tff.program.SavedModelFileReleaseManager(
                  os.path.join(root_dir, 'model')
              ),
              memory['model'],
          ]
      ),
      train_metrics_manager=RoundLog(os.path.join(root_dir, ROUNDS_LOG)),
      evaluation_manager=_evaluation_manager(root_dir, memory['eval']),
      evaluation_periodicity=total_rounds,
  )
  return memory


def main(argv: list[str]) -> None:
  root_dir, algorithm, total_rounds = argv[1], argv[2], int(argv[3])
  pause_after = int(argv[4]) if len(argv) > 4 else None
  os.makedirs(root_dir, exist_ok=True)
  with runtime.local_federated_context():
    (worker,) = runtime.running_workers()
    with open(os.path.join(root_dir, ROUNDS_LOG), 'a') as f:
      f.write(json.dumps({'start': os.getpid(), 'worker': worker.pid}) + '\n')
    asyncio.run(run_program(root_dir, algorithm, total_rounds, pause_after))


if __name__ == '__main__':
  main(sys.argv)
