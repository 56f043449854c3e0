"""Tests for the scale benchmark's arithmetic, probes and tables."""

import asyncio
import collections
import math
import os

import numpy as np
import pytest

from benchmarks import scale
from benchmarks import scale_report
from tff_fedwin.training import checkpoints as checkpoints_lib


def _numpy_sample(num_clients, k, seed, t):
  rng = np.random.default_rng([seed, t])
  return set(rng.choice(num_clients, size=k, replace=False).tolist())


def test_rounds_for_coverage_reaches_the_coverage():
  # k/N = 1/2: after R rounds 1 - 2^-R have a state; 0.75 needs R = 2.
  assert scale.rounds_for_coverage(10, 5, 0.75) == 2
  # 3,400 clients, 10 per round, 60%: log(0.4) / log(1 - 1/340) = 311.07.
  assert scale.rounds_for_coverage(3400, 10, 0.6) == 312


def test_rounds_for_coverage_is_one_when_every_client_trains():
  assert scale.rounds_for_coverage(10, 10, 0.99) == 1


def test_write_bytes_counts_a_written_file(tmp_path):
  before = scale.write_bytes()
  with open(tmp_path / 'f', 'wb') as f:
    f.write(b'\0' * 2**20)
    f.flush()
    os.fsync(f.fileno())
  assert scale.write_bytes() - before >= 2**20


def test_checkpoint_records_count_clients_updated_since_the_previous_one():
  ids = [f'{i:04d}' for i in range(30)]
  # (round, seconds, call bytes, write_bytes after the call).
  raw = [(0, 0.1, 5, 100), (3, 0.2, 7, 160), (5, 0.3, 9, 190)]
  records = scale.checkpoint_records(raw, ids, clients_per_round=4, seed=2)
  first = set().union(*(_numpy_sample(30, 4, 2, t) for t in (1, 2, 3)))
  second = set().union(*(_numpy_sample(30, 4, 2, t) for t in (4, 5)))
  assert [r.round_num for r in records] == [0, 3, 5]
  assert [r.updated_clients for r in records] == [0, len(first), len(second)]
  assert [r.clients_with_state for r in records] == [
      0,
      len(first),
      len(first | second),
  ]
  assert [r.call_bytes for r in records] == [5, 7, 9]
  assert [r.interval_bytes for r in records] == [5, 60, 30]


def test_timed_checkpoints_records_each_save_and_restores_the_method(
    tmp_path,
):
  original = checkpoints_lib.Checkpoints.save
  loop = asyncio.new_event_loop()
  try:
    checkpoints = checkpoints_lib.Checkpoints(
        str(tmp_path),
        identity=checkpoints_lib.RunIdentity(0, 1, 1),
        run=loop.run_until_complete,
    )
    state = collections.OrderedDict(w=np.ones([256, 256], np.float32))
    with scale._timed_checkpoints() as raw:  # pylint: disable=protected-access
      assert checkpoints_lib.Checkpoints.save is not original
      checkpoints.save(state, 0, None)
      checkpoints.save(state, 4, None)
  finally:
    loop.close()
  assert checkpoints_lib.Checkpoints.save is original
  assert [r[0] for r in raw] == [0, 4]
  # The program state holds the 256 KB array: at least that much written.
  assert all(r[2] >= 256 * 256 * 4 for r in raw)


def test_linear_fit_recovers_a_line():
  slope, intercept = scale_report.linear_fit([0, 10, 50], [3, 23, 103])
  assert slope == pytest.approx(2.0)
  assert intercept == pytest.approx(3.0)


def test_scale_specs_put_the_large_rows_first():
  specs = scale_report.scale_specs(
      variants=['scaffold', 'scaffold_wsm_ima'],
      clients_per_round=[10, 50],
      num_clients=3400,
      memory_num_clients=340,
      rounds=0,
      coverage=0.6,
  )
  stores = [s.client_states for s in specs]
  assert stores == ['disk'] * 4 + ['memory'] * 4
  assert [s.num_clients for s in specs] == [3400] * 4 + [340] * 4
  # Rounds for 60% of 3,400 clients: 312 at k=10, 63 at k=50.
  expected = math.ceil(math.log(0.4) / math.log(1 - 50 / 3400))
  assert [s.rounds for s in specs[:2]] == [312, expected]
  assert [s.rounds for s in specs[4:6]] == [312, expected]
  assert specs[0].name == 'scaffold_disk_3400x10'
  assert len({s.name for s in specs}) == 8


def test_scale_specs_memory_rounds():
  specs = scale_report.scale_specs(
      variants=['scaffold'],
      clients_per_round=[10],
      num_clients=3400,
      memory_num_clients=200,
      rounds=100,
      coverage=0.6,
      memory_rounds=30,
  )
  assert [(s.client_states, s.rounds) for s in specs] == [
      ('disk', 100),
      ('memory', 30),
  ]


def _result(name, store, seconds, checkpoints, state_mb=2.0):
  spec = scale.RowSpec(name, 'scaffold', 100, 10, store, 5)
  return scale.RowResult(
      spec=spec,
      seconds_per_round=seconds,
      driver_peak_gb=1.0,
      driver_anon_peak_gb=0.8,
      driver_file_peak_gb=0.2,
      worker_peak_gb=0.5,
      state_mb=state_mb,
      wall_seconds=10.0,
      loop_other_seconds=1.0,
      checkpoints=tuple(checkpoints),
  )


def test_scale_table_reports_ratios_to_the_memory_row():
  mb = 2**20
  disk = _result(
      'd',
      'disk',
      1.05,
      [
          scale.CheckpointRecord(0, 0.1, mb, mb, 0, 0),
          scale.CheckpointRecord(5, 0.2, 4 * mb, 41 * mb, 10, 10),
      ],
  )
  memory = _result('m', 'memory', 1.0, [])
  table = scale_report.scale_table([disk, memory], 'header')
  row = next(line for line in table.splitlines() if line.startswith('| d |'))
  assert '| 1.050 | 1.050 |' in row  # s/round, x memory.
  ckpt = [l for l in table.splitlines() if l.startswith('| d | 5 |')]
  # 41 MB over 10 clients of 2 MB: ratio 2.05.
  assert ckpt == ['| d | 5 | 10 | 10 | 4.0 | 41.0 | 2.05 | 0.20 |']
  # Fit through (0, 1 MB) and (10, 41 MB): 4 MB per client = 2 states.
  assert 'updated clients + 1.0 MB' in table
  assert 'slope / state = 2.00' in table


def test_memory_rows_are_fitted_against_clients_with_a_state():
  mb = 2**20
  memory = _result(
      'm',
      'memory',
      1.0,
      [
          scale.CheckpointRecord(0, 0.1, mb, mb, 0, 0),
          scale.CheckpointRecord(5, 0.2, 21 * mb, 21 * mb, 10, 10),
          scale.CheckpointRecord(9, 0.2, 31 * mb, 31 * mb, 8, 15),
      ],
  )
  table = scale_report.scale_table([memory], 'header')
  # Through (0, 1), (10, 21), (15, 31) MB: 2 MB per client with a state.
  assert 'x clients with state + 1.0 MB' in table
  assert 'slope / state = 1.00' in table


def test_store_work_table_gives_each_rows_share_of_its_round():
  disk = _result('d', 'disk', 2.0, [])
  memory = _result('m', 'memory', 1.6, [])
  table = scale_report.store_work_table([disk, memory], [100.0, 40.0])
  # 100 ms of a 2.0 s round: 5.0%; 40 ms of 1.6 s: 2.5%.
  assert '| d | disk | 100.0 | 5.0% |' in table
  assert '| m | memory | 40.0 | 2.5% |' in table


@pytest.mark.parametrize('build_datasets', [True, False])
def test_driver_path_runs_the_loops_round_work(build_datasets):
  ids = [f'{i:04d}' for i in range(40)]

  class FakeData:
    client_ids = ids

    def __init__(self):
      self.created = []

    def create_tf_dataset_for_client(self, client_id):
      self.created.append(client_id)
      return client_id

  class FakeStore:

    def __init__(self):
      self.updated, self.checkpoints = [], []

    def get(self, client_ids):
      return list(client_ids)

    def update(self, client_ids, states):
      assert list(states) == list(client_ids)
      self.updated.append(set(client_ids))

    def prepare_checkpoint(self, t):
      self.checkpoints.append(t)

    def finish_checkpoint(self, t, kept):
      del kept
      assert self.checkpoints[-1] == t

  data, store = FakeData(), FakeStore()
  seconds = scale_report.driver_path_seconds(
      data,
      clients_per_round=3,
      rounds=4,
      preprocess_fn=lambda d: d,
      store=store,
      rounds_per_checkpoint=2,
      seed=1,
      build_datasets=build_datasets,
  )
  assert seconds >= 0.0
  expected = [{ids[i] for i in _numpy_sample(40, 3, 1, t)} for t in range(1, 5)]
  assert store.updated == expected
  # 3 clients x 4 rounds; none when the workers build them by id.
  assert len(data.created) == (12 if build_datasets else 0)
  assert store.checkpoints == [2, 4]


def test_run_row_trains_and_measures(tmp_path):
  # A tiny real row: small model, 12 clients, 3 rounds, disk store.
  spec = scale.RowSpec('tiny', 'scaffold', 12, 3, 'disk', 3, 'small')
  result = scale.run_row(
      spec,
      examples_per_client=2,
      batch_size=2,
      rounds_per_checkpoint=2,
      warmup_rounds=1,
      output_dir=str(tmp_path),
  )
  assert [c.round_num for c in result.checkpoints] == [0, 2, 3]
  assert result.seconds_per_round > 0
  assert result.worker_peak_gb > 0 and result.driver_peak_gb > 0
  assert not os.path.exists(tmp_path / 'tiny')  # Deleted after the row.
  updated = result.checkpoints[1].updated_clients
  # The disk store wrote at least the updated clients' states.
  assert result.checkpoints[1].interval_bytes >= (
      updated * result.state_mb * 2**20
  )
