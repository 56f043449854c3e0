"""Tests for tff_fedwin.experiments.forks: a forked run is the run itself.

Whole runs on `tiny_data` (6 clients, 2 per round, 6 rounds, an eval and a
checkpoint every round). The trunk is an IMA row: W = 2 in 'broadcast' mode
from round 5 with IMA's client lr schedule (0.99^t before t_s). Each target
is trained twice, forked from the trunk at k and from round 1; every
metrics.csv value but the times, and the final server state, must be equal
bit for bit.

The trunks to round 4 (the largest k; rounds 1-4 kept, `CHECKPOINTS_TO_KEEP`)
are trained once per algorithm for the module (`trunk_runs`); a case forks from
a copy in its own directory. Every run uses the session's TFF worker
(tests/experiments/session_worker.py), not one of its own.
"""

import csv
import shutil

import attrs
import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin import experiments
from tff_fedwin import training
from tff_fedwin.experiments import forks
from tff_fedwin.training import checkpoints
from tff_fedwin.training import loop

from tests.experiments import session_worker
from tests.experiments import tiny_data

ROUNDS = 6
TIME_KEYS = ('round_time_seconds', 'eval_time_seconds')
NO_WINDOW = dict(
    window_size=0,
    window_mode='evaluate',
    window_start_round=0,
    client_lr_schedule='decay',
)
# {target: (overrides of the trunk, k)}. k by hand: the last eval round
# before the first round a window acts (max(W, t_s)) or the schedules part
# ('ima' leaves 'decay' at its t_s): no window: min(5, 5) - 1 = 4; W = 1
# from 5: 4; W = 2 from 3: min(5, 3, 3) - 1 = 2.
TARGETS = {
    'no_window': (NO_WINDOW, 4),
    'schedule_only_w1': (dict(window_size=1), 4),
    'early_start': (dict(window_start_round=3), 2),
}


def _trunk(data_npz, root, **overrides):
  return tiny_data.config(
      data_npz,
      root,
      'trunk',
      **{
          'total_rounds': ROUNDS,
          'client_momentum': 0.9,
          'rounds_per_eval': 1,
          'summary_last_n': 2,
          'window_size': 2,
          'window_mode': 'broadcast',
          'window_start_round': 5,
          'client_lr_schedule': 'ima',
          **overrides,
      },
  )


# The round the shared trunks stop after: the largest k of `TARGETS`.
TRUNK_ROUNDS = 4


def _algorithm_flags(algorithm):
  return dict(
      algorithm=algorithm,
      server_learning_rate=0.01 if algorithm == 'fedadam' else 1.0,
  )


@pytest.fixture(autouse=True)
def _on_the_session_worker(tff_execution_context):
  with session_worker.local_runs_on(tff_execution_context):
    yield


@pytest.fixture(scope='module')
def trunk_runs(data_npz, tmp_path_factory):
  """Trunks stopped after `TRUNK_ROUNDS`, one run per algorithm for the module.

  Returns:
    `copy_to(root, algorithm='fedavg')`: the trunk config under `root`, its
    run directory a copy of the shared run (the case may change it).
  """
  made = {}

  def copy_to(root, algorithm='fedavg'):
    if algorithm not in made:
      shared = _trunk(
          data_npz,
          tmp_path_factory.mktemp(f'trunk_{algorithm}'),
          **_algorithm_flags(algorithm),
      )
      experiments.run_experiment(shared, stop_after_round=TRUNK_ROUNDS)
      made[algorithm] = shared
    trunk = attrs.evolve(made[algorithm], root_output_dir=str(root))
    shutil.copytree(forks.run_dir(made[algorithm]), forks.run_dir(trunk))
    return trunk

  return copy_to


def _rows(config):
  with open(f'{forks.run_dir(config)}/metrics.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  return [{k: v for k, v in row.items() if k not in TIME_KEYS} for row in rows]


def _final_states(*configs):
  """The server states of the runs' last checkpoints (numpy).

  The runs differ only in their directories: one initial state (built on the
  session's worker, tests/conftest.py) is the structure of every checkpoint.
  """
  task = experiments.run.create_task(configs[0])
  num_clients = len(task.train_data.client_ids)
  # Only `initialize` runs: no client data bundle is written.
  initial = experiments.build_runner(
      attrs.evolve(configs[0], client_data_transfer='values'),
      task,
      num_clients,
  ).initialize()
  identity = checkpoints.RunIdentity(
      configs[0].seed, configs[0].clients_per_round, num_clients
  )
  with loop.event_loop() as run:
    return [
        checkpoints.Checkpoints(
            f'{forks.run_dir(config)}/checkpoints', identity=identity, run=run
        )
        .load_version(initial, ROUNDS)
        .server_state
        for config in configs
    ]


@pytest.mark.parametrize(
    'algorithm, target',
    [
        ('fedavg', 'no_window'),
        ('fedavg', 'schedule_only_w1'),
        ('fedavg', 'early_start'),
        ('fedadam', 'no_window'),
    ],
)
def test_forked_run_ends_as_a_run_from_round_one(
    trunk_runs, tmp_path, algorithm, target
):
  overrides, k = TARGETS[target]
  # Stopped after round 4 >= k, round k kept.
  trunk = trunk_runs(tmp_path / 'forked', algorithm)
  assert k in training.kept_rounds(forks.run_dir(trunk))
  forked = attrs.evolve(trunk, experiment_name=target, **overrides)
  alone = attrs.evolve(forked, root_output_dir=str(tmp_path / 'alone'))
  assert forks.fork_round(trunk, forked) == k

  forks.fork_config_run(trunk, forked, k)
  assert training.forked_from_round(forks.run_dir(forked)) == k
  summary = experiments.run_experiment(forked)
  experiments.run_experiment(alone)

  assert summary['resumed_from_round'] == k
  forked_rows = _rows(forked)
  if 'window_mode' in overrides:
    # The broadcast trunk's rows up to k hold its raw aggregate's columns,
    # the global model's before its window acts (round 5 > k): no window's
    # run has them.
    for row in forked_rows[:k]:
      metrics = [
          c[len('aggregate/') :] for c in row if c.startswith('aggregate/')
      ]
      assert metrics  # The trunk wrote them.
      for metric in metrics:
        assert row[f'aggregate/{metric}'] == row[f'global/{metric}']
    forked_rows = [
        {c: v for c, v in row.items() if not c.startswith('aggregate/')}
        for row in forked_rows
    ]
  assert forked_rows == _rows(alone)
  assert len(forked_rows) == ROUNDS
  got, want = _final_states(forked, alone)
  tf.nest.assert_same_structure(got, want)
  for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
    np.testing.assert_array_equal(a, b, strict=True)


def test_pending_forks_run_in_order_of_k_and_skip_a_trunk_past_k(
    data_npz, tmp_path, capsys
):
  trunk = _trunk(data_npz, tmp_path)
  jobs = [
      (k, trunk, attrs.evolve(trunk, experiment_name=name, **overrides))
      for name, (overrides, k) in TARGETS.items()
  ]
  # k = 4 listed first: the trunk must reach round 2 (fork), then round 4.
  forks.fork_pending(jobs)
  for name, (_, k) in TARGETS.items():
    assert training.forked_from_round(str(tmp_path / name)) == k
  assert max(training.kept_rounds(forks.run_dir(trunk))) == 4
  assert not forks.finished(trunk)  # Its summary.json is of 4 rounds.

  # Round 2 no longer kept, as `CHECKPOINTS_TO_KEEP` drops it in a longer
  # run: a new early-start target trains from round 1; started targets are
  # left alone.
  shutil.rmtree(f'{forks.run_dir(trunk)}/checkpoints/program_state_2')
  late = attrs.evolve(jobs[2][2], experiment_name='late')
  capsys.readouterr()
  forks.fork_pending(jobs + [(2, trunk, late)])
  assert training.kept_rounds(forks.run_dir(late)) == []
  assert capsys.readouterr().out.splitlines() == [
      f'{forks.run_dir(late)}: trains from round 1 ({forks.run_dir(trunk)} '
      'is past round 2)'
  ]


def test_run_from_round_one_is_no_fork(trunk_runs, tmp_path):
  # A fork killed before its checkpoint left metrics.csv and the marker;
  # --nofork then trains the target from round 1: not a forked run.
  trunk = trunk_runs(tmp_path)  # Stopped after round 4.
  target = attrs.evolve(trunk, experiment_name='target', **NO_WINDOW)
  forks.fork_config_run(trunk, target, 4)
  shutil.rmtree(f'{forks.run_dir(target)}/checkpoints')
  summary = experiments.run_experiment(target)
  assert summary['resumed_from_round'] is None
  assert training.forked_from_round(forks.run_dir(target)) is None
  assert [row['round_num'] for row in _rows(target)] == [
      str(t) for t in range(1, ROUNDS + 1)
  ]


def test_fork_into_a_started_run_is_refused(trunk_runs, tmp_path):
  trunk = trunk_runs(tmp_path)  # Stopped after round 4.
  target = attrs.evolve(trunk, experiment_name='target', **NO_WINDOW)
  experiments.run_experiment(target, stop_after_round=1)
  with pytest.raises(FileExistsError, match='has checkpoints'):
    forks.fork_config_run(trunk, target, 4)


def test_fork_at_another_round_is_refused(data_npz, tmp_path):
  trunk = _trunk(data_npz, tmp_path)
  target = attrs.evolve(trunk, experiment_name='target', **NO_WINDOW)
  with pytest.raises(ValueError, match='cannot fork .* at round 5'):
    forks.fork_config_run(trunk, target, 5)


# fork_round by hand, trunk W = 2 broadcast from t_s = 5, 'ima', eval every
# round, 6 rounds: k = the last eval round before min(max(W, t_s) of each
# window, the round the schedules part), if 1 <= k < 6.
@pytest.mark.parametrize(
    'trunk_overrides, target_overrides, k',
    [
        (dict(), NO_WINDOW, 4),
        # Eval every 3 rounds: the last multiple of 3 below 5.
        (dict(rounds_per_eval=3, total_rounds=6), dict(NO_WINDOW), 3),
        # A constant lr parts from IMA's decay at round 1.
        (dict(), dict(NO_WINDOW, client_lr_schedule='constant'), None),
        # Another config (lr), another window layout (W = 3), no trunk window,
        # a program window, SCAFFOLD: no fork.
        (dict(), dict(NO_WINDOW, client_learning_rate=0.1), None),
        (dict(), dict(window_size=3), None),
        (NO_WINDOW, dict(), None),
        (dict(window_location='program'), dict(NO_WINDOW), None),
        (dict(algorithm='scaffold'), dict(NO_WINDOW), None),
        # Server-side SWA (no window, swa_* not fork fields): no fork.
        (dict(), dict(NO_WINDOW, swa_start_round=4), None),
        # Both windows act from max(2, 0) = 2 (the schedules are the same):
        # k = 1.
        (dict(window_start_round=0), dict(window_mode='evaluate'), 1),
        # IMA's constant scheme from the same t_s = 0 parts from IMA's own
        # at once (both are 'decay' before t_s): no fork.
        (
            dict(window_start_round=0),
            dict(NO_WINDOW, client_lr_schedule='ima_constant'),
            None,
        ),
        # IMA's epoch decay every 2 rounds from t_s = 5 (trunk E = 3, 'ima'):
        # E_t parts from the trunk's at t = 7 > 5, so k = 4 as the window;
        # from t_s = 0 with P = 1 at t = 1: no fork.
        (
            dict(client_epochs=3),
            dict(window_mode='evaluate', client_epochs_decay_every=2),
            4,
        ),
        (
            dict(client_epochs=3, window_start_round=0),
            dict(window_mode='evaluate', client_epochs_decay_every=1),
            None,
        ),
        # The same scheme with the same flags from the same t_s: k as above.
        (
            dict(window_start_round=0, client_lr_schedule='ima_cyclic'),
            dict(window_mode='evaluate', client_lr_schedule='ima_cyclic'),
            1,
        ),
    ],
)
def test_fork_round_follows_hand_table(
    tmp_path, trunk_overrides, target_overrides, k
):
  trunk = _trunk('data.npz', tmp_path, **trunk_overrides)
  target = attrs.evolve(trunk, experiment_name='target', **target_overrides)
  assert forks.fork_round(trunk, target) == k


def test_fork_from_a_damaged_trunk_checkpoint_is_refused(trunk_runs, tmp_path):
  # The trunk's version 4 has a flipped byte: a fork checks it as a resume
  # does, and writes nothing of the target's.
  trunk = trunk_runs(tmp_path)
  target = attrs.evolve(trunk, experiment_name='target', **NO_WINDOW)
  version = f'{forks.run_dir(trunk)}/checkpoints/program_state_4'
  path = f'{version}/variables/variables.data-00000-of-00001'
  with open(path, 'r+b') as f:
    byte = f.read(1)
    f.seek(0)
    f.write(bytes([byte[0] ^ 0xFF]))

  with pytest.raises(
      checkpoints.NoIntactCheckpointError,
      match=r'^The checkpoint of round 4 in .*checkpoints is damaged or '
      r'incomplete \(checksum mismatch of .*variables\.data-00000-of-00001\); '
      r'it cannot be used\.$',
  ):
    forks.fork_config_run(trunk, target, 4)
  assert not training.kept_rounds(forks.run_dir(target))


def test_fork_takes_the_rows_its_trunk_checkpoint_vouches_for(
    trunk_runs, tmp_path
):
  # The trunk's metrics.csv was edited after its checkpoint of round 4: the
  # target gets rows 1..4 as the checkpoint keeps them.
  trunk = trunk_runs(tmp_path)
  target = attrs.evolve(trunk, experiment_name='target', **NO_WINDOW)
  original = _rows(trunk)
  path = f'{forks.run_dir(trunk)}/metrics.csv'
  with open(path, newline='') as f:
    rows = list(csv.reader(f))
  column = rows[0].index('global/accuracy')
  rows[2][column] = '0.5'
  with open(path, 'w', newline='') as f:
    csv.writer(f).writerows(rows)

  forks.fork_config_run(trunk, target, 4)

  forked = _rows(target)
  assert [row['round_num'] for row in forked] == ['1', '2', '3', '4']
  assert [row['global/accuracy'] for row in forked] == [
      row['global/accuracy'] for row in original
  ]
  assert forked[1]['global/accuracy'] != '0.5'
