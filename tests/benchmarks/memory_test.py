"""Tests for the memory-curve benchmark: sampling, growth, files."""

import os

import pytest

from benchmarks import memory
from benchmarks import memory_report
from tff_fedwin import runtime
from tff_fedwin import training
from tff_fedwin.experiments import config as config_lib


def _samples(driver, worker, every=50):
  return [
      memory.MemorySample(every * (i + 1), d, w, 10.0 * (i + 1))
      for i, (d, w) in enumerate(zip(driver, worker))
  ]


def test_growth_is_end_and_peak_over_the_reference_round():
  # Rounds 50..200; reference round 100: driver 200 -> end 220 (+10%), peak
  # 260 (+30%); the value at round 50 (100) is before the reference.
  samples = _samples([100, 200, 260, 220], [1, 1, 1, 1])
  end, peak = memory.growth(samples, 'driver_mb', 100)
  assert end == pytest.approx(0.10)
  assert peak == pytest.approx(0.30)


def test_growth_of_a_shrinking_curve_has_zero_peak():
  # Worker 400 at round 100, then 300: end 300/400 - 1 = -25%, peak 0.
  samples = _samples([1, 1, 1], [500, 400, 300])
  assert memory.growth(samples, 'worker_mb', 100) == pytest.approx((-0.25, 0))


def test_growth_needs_a_sample_at_or_after_the_reference():
  with pytest.raises(ValueError, match='round 100'):
    memory.growth(_samples([1], [1]), 'driver_mb', 100)


def test_level_growth_compares_medians_of_the_first_and_last_span():
  # Rounds 50..500 every 50; reference 100, span 200. First window rounds
  # 100..300: worker 100, 300, 100, 120, 110 -> median 110. Last window rounds
  # 300..500: 110, 130, 90, 200, 132 -> median 130. 130 / 110 - 1 = 0.1818...
  # (the single samples at rounds 100 and 500 would say +32%).
  worker = [999, 100, 300, 100, 120, 110, 130, 90, 200, 132]
  samples = _samples([1] * 10, worker)
  assert memory.level_growth(samples, 'worker_mb', 100, 200) == pytest.approx(
      130 / 110 - 1
  )


def test_level_growth_needs_a_sample_at_or_after_the_reference():
  with pytest.raises(ValueError, match='round 100'):
    memory.level_growth(_samples([1], [1]), 'driver_mb', 100)


def test_rss_mb_agrees_with_statm():
  # /proc/self/statm's second field is resident pages.
  with open('/proc/self/statm') as f:
    pages = int(f.read().split()[1])
  expected = pages * os.sysconf('SC_PAGE_SIZE') / 2**20
  assert memory.rss_mb() == pytest.approx(expected, abs=5.0)


class _FakeRunner(training.RoundRunner):
  """Counts rounds; its state is the round number."""

  def __init__(self):
    self.rounds = 0

  def run_round(self, state, datasets, client_states=None):
    self.rounds += 1
    return state + 1, client_states, {}

  def initialize(self):
    return 0

  def initial_client_state(self):
    return None

  def global_model_weights(self, state):
    return state

  def window_model_weights(self, state):
    return state


def test_sampled_runner_samples_every_kth_round_and_delegates():
  samples = []
  fake = _FakeRunner()
  runner = memory._SampledRunner(fake, 3, samples)  # pylint: disable=protected-access
  state = runner.initialize()
  for _ in range(7):
    state, _, _ = runner.run_round(state, [], None)
  assert state == 7 and fake.rounds == 7
  assert [s.round_num for s in samples] == [3, 6]
  assert all(s.driver_mb > 0 for s in samples)


@pytest.mark.parametrize('run', sorted(memory.RUNS))
def test_build_config_is_valid_for_every_run(run):
  config = memory.build_config(run, total_rounds=1000, sample_every=50)
  config_lib.validate_config(config)
  assert config.task == 'mnist'
  assert config.rounds_per_eval == 50


def test_build_config_cuts_the_window_to_short_runs():
  config = memory.build_config('fedavg_wima', total_rounds=4, sample_every=2)
  assert config.window_size == 4


def test_run_curve_rejects_rounds_not_a_multiple_of_the_period(tmp_path):
  with pytest.raises(ValueError, match='multiple of sample_every'):
    memory.run_curve(
        'scaffold', total_rounds=5, sample_every=2, output_dir=str(tmp_path)
    )


def test_run_curve_samples_driver_and_worker_and_stops_the_worker(tmp_path):
  # The session's own worker (tests/conftest.py) may be running.
  before = runtime.running_workers()
  samples = memory.run_curve(
      'scaffold', total_rounds=2, sample_every=1, output_dir=str(tmp_path)
  )
  assert [s.round_num for s in samples] == [1, 2]
  assert all(s.worker_mb > 0 and s.driver_mb > 0 for s in samples)
  assert samples[1].elapsed_seconds > samples[0].elapsed_seconds
  assert runtime.running_workers() == before
  # The run's training examples went by id through a bundle in its
  # directory (local workers); it is removed with the run, its checkpoints
  # are not.
  assert (tmp_path / 'scaffold' / 'checkpoints').is_dir()
  assert not (tmp_path / 'scaffold' / 'client_data').exists()


def test_csv_round_trip_table_and_plot(tmp_path):
  curves = {
      'a': _samples([100, 200, 220], [50, 100, 95]),
      'b': _samples([10, 20, 30], [5, 10, 10]),
  }
  for run, samples in curves.items():
    memory_report.write_csv(memory_report.csv_path(str(tmp_path), run), samples)
  read = {
      run: memory_report.read_csv(memory_report.csv_path(str(tmp_path), run))
      for run in curves
  }
  assert read == curves
  table = memory_report.markdown_table(read)
  # a: driver 200 -> 220 (+10.0%), worker 100 -> 95 (-5.0%, peak +0.0%);
  # b: driver 20 -> 30 (+50.0%); s/round: 10 s per 50 rounds = 0.20.
  # Levels (runs of 150 rounds: both windows hold rounds 100 and 150): a's
  # driver median 210 over 210, +0.0%.
  assert (
      '| a | 150 | 100 | 200 / 220 | +10.0% / +10.0% | +0.0% | 100 / 95 |'
      in table
  )
  assert '-5.0% / +0.0%' in table
  assert '+50.0% / +50.0%' in table
  assert '0.20 / 0.20' in table
  png = str(tmp_path / 'memory.png')
  memory_report.plot(read, png)
  with open(png, 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
