"""Memory over a long run: driver and worker RSS every few rounds.

`run_curve` trains one configuration of `RUNS` on the offline MNIST task
through `tff_fedwin.training.run_training` (the real loop: sampling, client
datasets, client states, evaluation, checkpoints) on a fresh local TFF worker,
and samples the resident memory (VmRSS) of this process (the driver) and of
the worker after every `sample_every`-th round, before that round's evaluation
and checkpoint (both also run every `sample_every` rounds). The growth after
round 100 (`growth`, `level_growth`) is what issue 15 item 4 bounds (<= 10%);
`tff_fedavg`, TFF's own `build_weighted_fed_avg` through
the same loop, is the baseline measured in the same run
(scripts/benchmark_memory.py, results/performance_history.md sec. 9).
"""

import statistics
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import attrs
import tensorflow_federated as tff

from tff_fedwin import round_runner
from tff_fedwin import runtime
from tff_fedwin.algorithms import runners
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import registry
from tff_fedwin.experiments import task_defaults
from tff_fedwin.experiments import run as run_lib
from tff_fedwin.training import loop
from tff_fedwin.training import outputs
from tff_fedwin.training import run_lock

# Run name -> (algorithm, window size). fedavg_wima reads its W=100 window
# every round (the costly reading, docs/design.md sec. 1.6).
RUNS = {
    'fedavg_wima': ('fedavg', 100),
    'scaffold': ('scaffold', 0),
    'tff_fedavg': ('tff_fedavg', 0),
}
GROWTH_FROM_ROUND = 100
LEVEL_SPAN_ROUNDS = 200  # `level_growth`'s windows.
_MB = 2**10  # /proc reports kB.


class MemorySample(NamedTuple):
  round_num: int
  driver_mb: float
  worker_mb: float  # Summed over the running workers.
  elapsed_seconds: float  # Since the start of the run.


def rss_mb(pid: Any = 'self') -> float:
  """Resident memory (VmRSS) of process `pid`, in MB."""
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / _MB
  raise ValueError(f'/proc/{pid}/status has no VmRSS line.')


def growth(
    samples: Sequence[MemorySample],
    key: str,
    from_round: int = GROWTH_FROM_ROUND,
) -> tuple[float, float]:
  """Growth of `key` (`driver_mb`, `worker_mb`) after round `from_round`.

  Args:
    samples: A curve, in round order.
    key: The field of `MemorySample` to measure.
    from_round: The reference round; the first sample at or after it.

  Returns:
    `(end, peak)`: the last sample and the largest sample at or after the
    reference, each divided by the reference sample, minus 1.

  Raises:
    ValueError: If no sample is at or after `from_round`.
  """
  later = [s for s in samples if s.round_num >= from_round]
  if not later:
    raise ValueError(f'No sample at or after round {from_round}.')
  reference = getattr(later[0], key)
  values = [getattr(s, key) for s in later]
  return values[-1] / reference - 1.0, max(values) / reference - 1.0


def level_growth(
    samples: Sequence[MemorySample],
    key: str,
    from_round: int = GROWTH_FROM_ROUND,
    span: int = LEVEL_SPAN_ROUNDS,
) -> float:
  """Growth of `key`'s level: median of the last `span` rounds over the first.

  Single samples of a curve that trims every few seconds lie anywhere on a
  saw tooth; the median of the samples in rounds [from_round, from_round +
  span] and in [last round - span, last round] compares levels instead.

  Returns:
    The second median divided by the first, minus 1.

  Raises:
    ValueError: If no sample is at or after `from_round`.
  """
  later = [s for s in samples if s.round_num >= from_round]
  if not later:
    raise ValueError(f'No sample at or after round {from_round}.')
  first = [getattr(s, key) for s in later if s.round_num <= from_round + span]
  last_round = later[-1].round_num
  last = [getattr(s, key) for s in later if s.round_num >= last_round - span]
  return statistics.median(last) / statistics.median(first) - 1.0


def build_config(
    run: str, *, total_rounds: int, sample_every: int, seed: int = 0
) -> config_lib.ExperimentConfig:
  """`run`'s configuration on the MNIST task (README defaults otherwise).

  The window is cut to `total_rounds` in runs shorter than it.
  """
  if run not in RUNS:
    raise ValueError(f'Unknown run {run!r}; one of {sorted(RUNS)}.')
  algorithm, window_size = RUNS[run]
  return task_defaults.with_task_defaults(
      config_lib.ExperimentConfig(
          task='mnist',
          algorithm='fedavg' if algorithm == 'tff_fedavg' else algorithm,
          window_size=min(window_size, total_rounds),
          total_rounds=total_rounds,
          rounds_per_eval=sample_every,
          rounds_per_checkpoint=sample_every,
          seed=seed,
          experiment_name=run,
      )
  )


def _build_runner(run: str, config, task) -> Any:
  if RUNS[run][0] == 'tff_fedavg':
    return runners.LearningProcessRunner(
        tff.learning.algorithms.build_weighted_fed_avg(
            task.model_fn,
            tff.learning.optimizers.build_sgdm(config.client_learning_rate),
        )
    )
  return registry.build_runner(config, task, len(task.train_data.client_ids))


class _SampledRunner(round_runner.ForwardingRunner):
  """A `RoundRunner` that records a `MemorySample` after every k-th round."""

  def __init__(self, runner: Any, every: int, samples: list[MemorySample]):
    super().__init__(runner)
    self._every = every
    self._samples = samples
    self._rounds = 0
    self._start = time.monotonic()

  def run_round(self, state, datasets, client_states) -> Any:
    result = self.inner.run_round(state, datasets, client_states)
    self._rounds += 1
    if self._rounds % self._every == 0:
      self._samples.append(
          MemorySample(
              round_num=self._rounds,
              driver_mb=rss_mb(),
              worker_mb=sum(rss_mb(w.pid) for w in runtime.running_workers()),
              elapsed_seconds=time.monotonic() - self._start,
          )
      )
    return result


def run_curve(
    run: str,
    *,
    total_rounds: int,
    sample_every: int,
    output_dir: str,
    seed: int = 0,
) -> list[MemorySample]:
  """Trains `run` from scratch for `total_rounds`; samples every k rounds.

  Args:
    run: One of `RUNS`.
    total_rounds: Rounds to train, a multiple of `sample_every`.
    sample_every: Rounds between samples (the loop's eval and checkpoint
      period).
    output_dir: Root of the run directory `output_dir/run`, deleted before
      the run (a leftover would be resumed).
    seed: Partition, model and sampling seed.

  Returns:
    One `MemorySample` per `sample_every` rounds, in round order.

  Raises:
    ValueError: If `total_rounds` is not a multiple of `sample_every`.
  """
  if sample_every < 1 or total_rounds % sample_every:
    raise ValueError(
        f'total_rounds ({total_rounds}) must be a multiple of sample_every '
        f'({sample_every}) >= 1.'
    )
  config = build_config(
      run, total_rounds=total_rounds, sample_every=sample_every, seed=seed
  )
  # The run's own files (SCAFFOLD's client state files) in its directory.
  config = attrs.evolve(config, root_output_dir=output_dir)
  config_lib.validate_config(config)
  run_dir = outputs.RunPaths(output_dir, run).root
  task = run_lib.create_task(config)
  samples = []
  with run_lock.hold(run_dir):
    run_lock.clear_held(run_dir)  # A leftover would be resumed.
    with (
        runtime.local_execution_context(),
        run_lib.client_data_removed_at_exit(config),
    ):
      runner = _SampledRunner(
          _build_runner(run, config, task), sample_every, samples
      )
      loop.run_training(
          runner,
          train_client_data=task.train_data,
          preprocess_fn=task.preprocess_fn,
          clients_per_round=config.clients_per_round,
          total_rounds=total_rounds,
          seed=seed,
          evaluate_fn=task.build_evaluate_fn(),
          rounds_per_eval=sample_every,
          rounds_per_checkpoint=sample_every,
          output_dir=output_dir,
          experiment_name=run,
          client_states='memory',
      )
  return samples
