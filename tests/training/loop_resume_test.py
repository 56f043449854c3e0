"""Tests for tff_fedwin.training.loop.run_training: checkpoints and resumption.

The task is tests/softmax_task.py. A resumed run is compared with an
uninterrupted one; the client states with the states the process returned.
"""

import collections
import os

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import softmax_task as task
from tests.training import loop_fixtures
from tff_fedwin import training
from tff_fedwin.algorithms import scaffold
from tff_fedwin.training import client_state_stores

_leaves = task.leaves
_Crash = loop_fixtures.Crash
_runner = loop_fixtures.make_runner
_run = loop_fixtures.run
_read_csv = loop_fixtures.read_csv
_assert_summary = loop_fixtures.assert_summary


def _saved_store(output_dir, round_num):
  return training.ClientStateStore.load(
      os.path.join(
          str(output_dir),
          'exp',
          'checkpoints',
          f'client_states_{round_num}.npz',
      ),
      scaffold.initial_client_state(task.model_fn),
  )


def _assert_same_stores(actual, expected):
  assert actual.client_ids == expected.client_ids
  for a, e in zip(
      actual.get(expected.client_ids), expected.get(expected.client_ids)
  ):
    for leaf_a, leaf_e in zip(_leaves(a), _leaves(e)):
      np.testing.assert_array_equal(leaf_a, leaf_e)


def _returned_states(runner):
  """Each client's last returned state, in order of first appearance."""
  latest = collections.OrderedDict()
  for ids, states in zip(runner.client_ids, runner.client_states_out):
    for client_id, state in zip(ids, states):
      latest[client_id] = state
  return latest


def _program_state_versions(output_dir):
  names = os.listdir(os.path.join(str(output_dir), 'exp', 'checkpoints'))
  return sorted(
      int(n[len('program_state_') :])
      for n in names
      if n.startswith('program_state_')
  )


def _client_state_rounds(output_dir):
  names = os.listdir(os.path.join(str(output_dir), 'exp', 'checkpoints'))
  return sorted(
      int(n[len('client_states_') : -len('.npz')])
      for n in names
      if n.startswith('client_states_')
  )


@pytest.mark.parametrize(
    'total_rounds, rounds_per_checkpoint, expected',
    [
        # Version 0 is the initial state; then every k rounds and the last round.
        (5, 2, [0, 2, 4, 5]),
        (3, 3, [0, 3]),
        # Five kept: the first and the newest four.
        (7, 1, [0, 4, 5, 6, 7]),
    ],
)
def test_checkpoints_every_k_rounds_and_at_the_end_with_client_states(
    processes, tmp_path, total_rounds, rounds_per_checkpoint, expected
):
  runner = _runner(processes, 'scaffold')

  _run(
      runner,
      tmp_path,
      total_rounds=total_rounds,
      rounds_per_checkpoint=rounds_per_checkpoint,
      rounds_per_eval=100,
  )

  assert _program_state_versions(tmp_path) == expected
  assert _client_state_rounds(tmp_path) == expected
  saved = _saved_store(tmp_path, total_rounds)
  returned = _returned_states(runner)
  assert saved.client_ids == tuple(returned)
  for a, b in zip(saved.get(list(returned)), returned.values()):
    for leaf_a, leaf_b in zip(_leaves(a), _leaves(b)):
      np.testing.assert_array_equal(leaf_a, leaf_b)


def test_client_states_are_saved_before_the_program_state_of_their_round(
    processes, tmp_path, monkeypatch
):
  events = []
  store_save = training.ClientStateStore.save
  state_save = tff.program.FileProgramStateManager.save

  def recording_store_save(self, path):
    events.append(('client_states', os.path.basename(path)))
    store_save(self, path)

  async def recording_state_save(self, program_state, version):
    events.append(('program_state', version))
    await state_save(self, program_state, version)

  monkeypatch.setattr(training.ClientStateStore, 'save', recording_store_save)
  monkeypatch.setattr(
      tff.program.FileProgramStateManager, 'save', recording_state_save
  )

  _run(
      _runner(processes, 'scaffold'),
      tmp_path,
      total_rounds=3,
      rounds_per_checkpoint=2,
  )

  assert events == [
      ('client_states', 'client_states_0.npz'),
      ('program_state', 0),
      ('client_states', 'client_states_2.npz'),
      ('program_state', 2),
      ('client_states', 'client_states_3.npz'),
      ('program_state', 3),
  ]


@pytest.fixture(scope='module')
def uninterrupted_runs(processes, tmp_path_factory):
  """Uninterrupted 4-round runs, one per process kind, made on first use."""
  runs = {}

  def get(kind):
    if kind not in runs:
      output_dir = tmp_path_factory.mktemp(f'uninterrupted_{kind}')
      runner = _runner(processes, kind)
      _run(runner, output_dir)
      runs[kind] = (runner, _read_csv(output_dir), output_dir)
    return runs[kind]

  return get


def _without_times(row):
  return {
      k: v
      for k, v in row.items()
      if k not in ('round_time_seconds', 'eval_time_seconds')
  }


@pytest.mark.parametrize(
    'kind, crash, resumed_from, client_states',
    [
        # Checkpoints at rounds 0, 2, 4. A crash in round 3 or 4 resumes from 2,
        # in round 1 from the initial state.
        ('fedavg', ('round', 3), 2, 'memory'),
        ('window', ('round', 3), 2, 'memory'),
        ('window', ('round', 4), 2, 'memory'),
        ('scaffold', ('round', 1), 0, 'memory'),
        ('scaffold', ('round', 3), 2, 'memory'),
        ('scaffold', ('round', 4), 2, 'memory'),
        ('scaffold', ('round', 3), 2, 'disk'),
        # Dies after client_states_2.npz (or delta_2/), before
        # program_state_2: resumes from 0.
        ('scaffold', ('program_state_save', 2), 0, 'memory'),
        ('scaffold', ('program_state_save', 2), 0, 'disk'),
    ],
)
def test_resumed_run_ends_exactly_as_uninterrupted_run(
    processes,
    uninterrupted_runs,
    tmp_path,
    monkeypatch,
    kind,
    crash,
    resumed_from,
    client_states,
):
  reference, reference_rows, _ = uninterrupted_runs(kind)
  crash_kind, crash_at = crash
  crashing = _runner(
      processes, kind, crash_at if crash_kind == 'round' else None
  )
  if crash_kind == 'program_state_save':
    state_save = tff.program.FileProgramStateManager.save

    async def failing_save(self, program_state, version):
      if version == crash_at:
        raise _Crash()
      await state_save(self, program_state, version)

    monkeypatch.setattr(
        tff.program.FileProgramStateManager, 'save', failing_save
    )
  with pytest.raises(_Crash):
    _run(crashing, tmp_path, client_states=client_states)
  monkeypatch.undo()
  resumed = _runner(processes, kind)

  summary = _run(resumed, tmp_path, client_states=client_states)

  assert summary['resumed_from_round'] == resumed_from
  assert len(resumed.client_ids) == 4 - resumed_from
  assert resumed.client_ids == reference.client_ids[resumed_from:]
  for actual, expected in zip(
      _leaves(resumed.states[-1]), _leaves(reference.states[-1])
  ):
    np.testing.assert_array_equal(actual, expected)
  for actual, expected in zip(
      _leaves(resumed.window_model_weights(resumed.states[-1])),
      _leaves(reference.window_model_weights(reference.states[-1])),
  ):
    np.testing.assert_array_equal(actual, expected)
  assert [_without_times(r) for r in _read_csv(tmp_path)] == [
      _without_times(r) for r in reference_rows
  ]


def test_resumed_scaffold_run_has_the_uninterrupted_client_states(
    processes, uninterrupted_runs, tmp_path
):
  reference, _, reference_dir = uninterrupted_runs('scaffold')
  with pytest.raises(_Crash):
    _run(_runner(processes, 'scaffold', crash_at_call=3), tmp_path)
  resumed = _runner(processes, 'scaffold')

  _run(resumed, tmp_path)

  expected_store = _saved_store(reference_dir, 4)
  assert len(expected_store.client_ids) >= 2
  assert expected_store.client_ids == tuple(_returned_states(reference))
  _assert_same_stores(_saved_store(tmp_path, 4), expected_store)


@pytest.mark.parametrize('outside', [False, True])
def test_resumed_disk_store_has_the_uninterrupted_client_states(
    processes, uninterrupted_runs, tmp_path, outside
):
  # `outside`: the store in its own directory (`client_states_dir`), not
  # under the checkpoints; its manifest entries are then no paths inside the
  # checkpoint directory (every version read as malformed, until 2026-12-03,
  # and the run resumed from round 0).
  reference, _, _ = uninterrupted_runs('scaffold')
  store_dir = str(tmp_path / 'states') if outside else None
  with pytest.raises(_Crash):
    _run(
        _runner(processes, 'scaffold', crash_at_call=3),
        tmp_path / 'run',
        client_states='disk',
        client_states_dir=store_dir,
    )

  summary = _run(
      _runner(processes, 'scaffold'),
      tmp_path / 'run',
      client_states='disk',
      client_states_dir=store_dir,
  )

  assert summary['resumed_from_round'] == 2
  assert not os.path.exists(tmp_path / 'run' / 'exp' / 'damaged')
  returned = _returned_states(reference)
  assert len(returned) >= 2
  store = client_state_stores.open_client_states(
      'disk',
      scaffold.initial_client_state(task.model_fn),
      list(task.CLIENT_DATA.client_ids),
      checkpoint_dir=os.path.join(str(tmp_path), 'run', 'exp', 'checkpoints'),
      directory=store_dir,
      round_num=4,
  )
  try:
    states = store.get(list(returned))
  finally:
    store.close()
  for actual, expected in zip(states, returned.values()):
    for leaf_a, leaf_e in zip(_leaves(actual), _leaves(expected)):
      np.testing.assert_array_equal(leaf_a, leaf_e)


def test_summary_ignores_rows_of_a_longer_crashed_run(processes, tmp_path):
  # Checkpoints at 0 and 2; round 3 is in the CSV when round 4 dies.
  with pytest.raises(_Crash):
    _run(_runner(processes, 'fedavg', crash_at_call=4), tmp_path)

  summary = _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)

  assert summary['eval_rounds'] == [1, 2]
  rows = [r for r in _read_csv(tmp_path) if int(r['round_num']) <= 2]
  _assert_summary(summary, rows, last_n=10)


def test_resume_is_logged_and_progress_printed(processes, tmp_path, capsys):
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)
  capsys.readouterr()

  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=3)

  lines = capsys.readouterr().out.splitlines()
  assert any('resuming from the checkpoint of round 2' in l for l in lines)
  progress = [l for l in lines if 'round 3/3' in l]
  assert len(progress) == 1
  assert 'ETA' in progress[0] and 'global/accuracy' in progress[0]


@pytest.mark.parametrize(
    'overrides, argument',
    [
        (dict(seed=6), '`seed`'),
        (dict(clients_per_round=3), '`clients_per_round`'),
        (dict(total_rounds=1), '`total_rounds`'),
    ],
)
def test_resume_with_other_arguments_raises(
    processes, tmp_path, overrides, argument
):
  _run(_runner(processes, 'fedavg'), tmp_path, total_rounds=2)

  with pytest.raises(ValueError, match=argument):
    _run(_runner(processes, 'fedavg'), tmp_path, **overrides)
