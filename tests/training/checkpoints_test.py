"""Tests for tff_fedwin.training.checkpoints on a small numpy server state."""

import asyncio
import collections
import errno
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.training import checkpoint_manifest
from tff_fedwin.training import checkpoints as checkpoints_lib
from tff_fedwin.training import client_state_stores
from tff_fedwin.training import client_states

IDENTITY = checkpoints_lib.RunIdentity(
    seed=5, clients_per_round=2, num_clients=4
)
TEMPLATE = collections.OrderedDict(c=np.zeros(3, np.float32))


def _state(value):
  return collections.OrderedDict(
      w=np.full([2], value, np.float32), t=np.int32(value)
  )


@pytest.fixture
def event_loop_run():
  loop = asyncio.new_event_loop()
  yield loop.run_until_complete
  loop.close()


def _checkpoints(tmp_path, run, identity=IDENTITY):
  return checkpoints_lib.Checkpoints(
      str(tmp_path / 'checkpoints'), identity=identity, run=run
  )


def _store(tmp_path, value):
  store = client_states.ClientStateStore(TEMPLATE)
  store.update(
      ['a'], [collections.OrderedDict(c=np.full(3, value, np.float32))]
  )
  return client_state_stores.MemoryClientStates(
      store, str(tmp_path / 'checkpoints')
  )


def _open(tmp_path, kind, round_num=None):
  return client_state_stores.open_client_states(
      kind,
      TEMPLATE,
      ['a', 'b', 'c'],
      checkpoint_dir=str(tmp_path / 'checkpoints'),
      round_num=round_num,
  )


def _files(tmp_path):
  return sorted(os.listdir(tmp_path / 'checkpoints'))


def test_load_latest_without_checkpoints_is_none(tmp_path, event_loop_run):
  checkpoints = _checkpoints(tmp_path, event_loop_run)
  assert checkpoints.load_latest(_state(0), total_rounds=3) is None


def test_load_latest_restores_the_newest_state(tmp_path, event_loop_run):
  checkpoints = _checkpoints(tmp_path, event_loop_run)
  for round_num in (0, 2, 3):
    checkpoints.save(_state(round_num), round_num, None)

  restored = _checkpoints(tmp_path, event_loop_run).load_latest(
      _state(0), total_rounds=3
  )

  assert (restored.round_num, restored.version) == (3, 3)
  np.testing.assert_array_equal(restored.server_state['w'], [3.0, 3.0])
  assert int(restored.server_state['t']) == 3
  assert not [n for n in _files(tmp_path) if n.startswith('client_states')]


@pytest.mark.parametrize(
    'identity, argument',
    [
        (IDENTITY._replace(seed=6), '`seed`'),
        (IDENTITY._replace(clients_per_round=3), '`clients_per_round`'),
        (IDENTITY._replace(num_clients=5), '`train_client_data`'),
    ],
)
def test_load_latest_rejects_other_arguments(
    tmp_path, event_loop_run, identity, argument
):
  _checkpoints(tmp_path, event_loop_run).save(_state(1), 1, None)

  with pytest.raises(checkpoints_lib.CheckpointMismatchError, match=argument):
    _checkpoints(tmp_path, event_loop_run, identity).load_latest(
        _state(0), total_rounds=3
    )


def test_load_latest_rejects_a_server_state_of_another_structure(
    tmp_path, event_loop_run
):
  _checkpoints(tmp_path, event_loop_run).save(_state(1), 1, None)
  other = collections.OrderedDict(process=_state(0), window=np.int64(0))

  with pytest.raises(
      checkpoints_lib.CheckpointMismatchError, match='another structure'
  ) as raised:
    _checkpoints(tmp_path, event_loop_run).load_latest(other, total_rounds=3)
  assert '\n' not in str(raised.value)


def test_load_latest_rejects_a_checkpoint_past_total_rounds(
    tmp_path, event_loop_run
):
  _checkpoints(tmp_path, event_loop_run).save(_state(4), 4, None)

  with pytest.raises(ValueError, match=r'`total_rounds` \(3\).*\(4\)'):
    _checkpoints(tmp_path, event_loop_run).load_latest(
        _state(0), total_rounds=3
    )


def test_client_states_of_dropped_versions_are_removed(
    tmp_path, event_loop_run
):
  checkpoints = _checkpoints(tmp_path, event_loop_run)
  for round_num in range(7):
    checkpoints.save(_state(round_num), round_num, _store(tmp_path, round_num))

  # Five versions kept: the first and the newest four.
  kept = [0, 3, 4, 5, 6]
  assert _files(tmp_path) == sorted(
      [f'client_states_{t}.npz' for t in kept]
      + [f'program_state_{t}' for t in kept]
  )


@pytest.mark.parametrize('kind', ['memory', 'disk'])
def test_save_makes_the_client_states_of_its_round_restorable(
    tmp_path, event_loop_run, kind
):
  checkpoints = _checkpoints(tmp_path, event_loop_run)
  store = _open(tmp_path, kind)
  checkpoints.save(_state(0), 0, store)
  store.update(['a'], [collections.OrderedDict(c=np.full(3, 2.5, np.float32))])
  checkpoints.save(_state(2), 2, store)
  store.close()

  restored = _open(tmp_path, kind, round_num=2)

  np.testing.assert_array_equal(restored.get(['a'])[0]['c'], [2.5] * 3)
  np.testing.assert_array_equal(restored.get(['b'])[0]['c'], [0.0] * 3)
  restored.close()


@pytest.mark.parametrize(
    'kind, missing', [('memory', 'client_states_2.npz'), ('disk', 'no client')]
)
def test_restoring_missing_client_states_names_them(
    tmp_path, event_loop_run, kind, missing
):
  _checkpoints(tmp_path, event_loop_run).save(_state(2), 2, None)

  with pytest.raises(FileNotFoundError, match=missing):
    _open(tmp_path, kind, round_num=2)


def test_load_latest_rolls_metrics_csv_back_to_the_resumed_round(
    tmp_path, event_loop_run
):
  # A run checkpoints rounds 1 and 2, writes the rows of rounds 3 and 4 and is
  # killed: the resume (from round 2) leaves metrics.csv with rows 1..2 only,
  # before its round 3 is released (a kill in between must not keep rows 3-4).
  csv_path = tmp_path / 'metrics.csv'
  lines = ['round_num,loss\n'] + [f'{t},{t / 10}\n' for t in range(1, 5)]
  checkpoints = checkpoints_lib.Checkpoints(
      str(tmp_path / 'checkpoints'),
      identity=IDENTITY,
      run=event_loop_run,
      metrics_csv=str(csv_path),
  )
  for round_num in (1, 2):
    csv_path.write_text(''.join(lines[: round_num + 1]))
    checkpoints.save(_state(round_num), round_num, None)
  csv_path.write_text(''.join(lines))

  restored = checkpoints_lib.Checkpoints(
      str(tmp_path / 'checkpoints'),
      identity=IDENTITY,
      run=event_loop_run,
      metrics_csv=str(csv_path),
  ).load_latest(_state(0), total_rounds=4)

  assert restored.round_num == 2
  assert csv_path.read_text().splitlines() == [
      'round_num,loss',
      '1,0.1',
      '2,0.2',
  ]


def _two_versions(tmp_path, run):
  """Versions 2 and 3 of `_state(t)`; the Checkpoints of the directory."""
  checkpoints = _checkpoints(tmp_path, run)
  for round_num in (2, 3):
    checkpoints.save(_state(round_num), round_num, None)
  return checkpoints


def _all_files(tmp_path):
  """Every path under tmp_path with its bytes."""
  return {
      os.path.join(parent, name): open(os.path.join(parent, name), 'rb').read()
      for parent, _, names in os.walk(tmp_path)
      for name in names
  }


def _truncate(path):
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def _zero_fill(path):
  with open(path, 'r+b') as f:
    f.write(bytes(os.path.getsize(path)))


def _flip_first_byte(path):
  with open(path, 'r+b') as f:
    first = f.read(1)
    f.seek(0)
    f.write(bytes([first[0] ^ 0xFF]))


_VARIABLES = os.path.join('variables', 'variables.data-00000-of-00001')


@pytest.mark.parametrize(
    'relative, damage',
    [
        ('saved_model.pb', _truncate),  # TF: OSError without errno.
        ('saved_model.pb', _zero_fill),  # ValueError.
        (_VARIABLES, os.remove),  # OpError, code UNKNOWN.
        (_VARIABLES, _zero_fill),  # OpError, code UNKNOWN.
        (_VARIABLES, _flip_first_byte),  # DataLossError.
    ],
)
def test_a_program_state_its_manifest_vouches_for_that_does_not_load_is_damage(
    tmp_path, event_loop_run, relative, damage
):
  # The manifest is rewritten after the damage: it lists the damaged bytes, so
  # only the load of version 3 can find it (a parse error of a vouched file).
  checkpoints = _two_versions(tmp_path, event_loop_run)
  damage(os.path.join(checkpoints.directory, 'program_state_3', relative))
  checkpoint_manifest.write(checkpoints.directory, 3, {}, None)

  restored = _checkpoints(tmp_path, event_loop_run).load_latest(
      _state(0), total_rounds=3
  )

  assert (restored.round_num, restored.version) == (2, 2)
  (moved,) = os.listdir(tmp_path / 'damaged')
  assert moved.startswith('program_state_3-')
  assert _files(tmp_path) == ['program_state_2']


@pytest.mark.parametrize(
    'error, match',
    [
        (MemoryError('no memory for the restore'), 'no memory'),
        (OSError(errno.EIO, 'Input/output error'), 'Input/output error'),
        (OSError(errno.EMFILE, 'Too many open files'), 'Too many open'),
        (
            tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating'),
            'OOM when allocating',
        ),
        (tf.errors.UnavailableError(None, None, 'socket closed'), 'socket'),
    ],
)
def test_a_load_error_that_is_not_damage_moves_nothing(
    tmp_path, event_loop_run, monkeypatch, error, match
):
  _two_versions(tmp_path, event_loop_run)
  before = _all_files(tmp_path)
  checkpoints = _checkpoints(tmp_path, event_loop_run)

  async def failing_load(version, structure):
    del version, structure
    raise error

  monkeypatch.setattr(checkpoints._manager, 'load', failing_load)
  with pytest.raises(type(error), match=match):
    checkpoints.resume(_state(0), total_rounds=3)

  assert _all_files(tmp_path) == before  # Version 3 kept, nothing rewritten.


def test_a_malformed_manifest_is_damage_and_the_resume_falls_back(
    tmp_path, event_loop_run
):
  # Parses, but a file's entry is no (size, CRC-32) pair: a TypeError before.
  checkpoints = _two_versions(tmp_path, event_loop_run)
  path = checkpoint_manifest.manifest_path(checkpoints.directory, 3)
  with open(path) as f:
    manifest = json.load(f)
  (relative,) = [k for k in manifest['files'] if k.endswith('saved_model.pb')]
  manifest['files'][relative] = 1234
  with open(path, 'w') as f:
    json.dump(manifest, f)

  restored = _checkpoints(tmp_path, event_loop_run).load_latest(
      _state(0), total_rounds=3
  )

  assert restored.version == 2
  (moved,) = os.listdir(tmp_path / 'damaged')
  assert moved.startswith('program_state_3-')
