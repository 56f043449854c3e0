"""Tests for tff_fedwin.experiments.run_record: the flags a run is started with.

In-process checks of the record and its comparison, one case per field; the
subprocess runs of scripts/run_experiment.py are in
tests/scripts/run_directory_test.py.
"""

import json
import logging
import os
import re

import attrs
import pytest

from tff_fedwin import errors
from tff_fedwin import experiments
from tff_fedwin import runtime
from tff_fedwin import version
from tff_fedwin.experiments import run_record
from tff_fedwin.training import checkpoint_manifest

# As `run_experiment` records a config: the learning rates set.
_BASE = experiments.ExperimentConfig(
    client_learning_rate=0.05, server_learning_rate=1.0
)
# Every field that changes the numbers, with a value other than the default's
# (written here, not taken from the code under test): a resume with it is
# refused. Each other field must be in MAY_DIFFER (test_every_field_decided).
CHANGES = dict(
    task='emnist',
    data_npz='/data/other.npz',
    data_dir='/data/leaf',
    leaf_kind='shakespeare',
    leaf_images_dir='/data/img_align_celeba',
    leaf_vocab_file='/data/embs.json',
    data_jsonl='/data/text.jsonl',
    text_level='char',
    text_tokenizer='whitespace',
    vocab_size=500,
    sequence_length=30,
    test_fraction=0.1,
    text_model='small',
    stackoverflow_test_batches=5,
    client_shuffle_buffer=1,
    model='resnet20_gn',
    scale_integer_features=False,
    eval_split='validation',
    eval_per_client=True,
    use_synthetic_data=True,
    num_clients=50,
    dirichlet_alpha=0.5,
    algorithm='scaffold',
    client_loss='wsm',
    proximal_strength=0.1,
    feddyn_alpha=0.1,
    adabest_mu=0.01,
    adabest_beta=0.5,
    fedcm_alpha=0.1,
    fedacg_lambda=0.85,
    fedacg_beta=0.01,
    mime_beta=0.9,
    fedgma_threshold=0.8,
    fedfa_lambda=0.1,
    fedfa_momentum=0.9,
    fedfa_calibration_start_round=12,
    client_weight_decay=0.001,
    client_lr_low=1e-4,
    client_lr_cycle=10,
    swa_start_round=30,
    swa_cycle=5,
    num_classes=12,
    window_size=10,
    window_mode='broadcast',
    window_start_round=5,
    window_read_every=2,
    window_location='program',
    window_sizes='5,20',
    window_part='classifier',
    client_sharpness='asam',
    sam_rho=0.2,
    sam_eta=0.05,
    client_lr_schedule='ima',
    clients_per_round=5,
    client_epochs=2,
    client_epochs_decay_every=3,
    client_batch_size=32,
    client_max_elements=64,
    client_learning_rate=0.5,
    client_momentum=0.9,
    server_learning_rate=0.5,
    server_epsilon=1e-5,
    seed=1,
    rounds_per_eval=1,
    client_states='disk',
    client_states_dir='/states',
)
# Fields a resume may change, with a value other than the default's.
ALLOWED_CHANGES = dict(
    total_rounds=200,
    rounds_per_checkpoint=1,
    summary_last_n=2,
    client_state_transfer='values',
    server_state_transfer='values',
    client_data_transfer='values',
    cache_dir='/cache',
    max_npz_bytes=2**20,
    root_output_dir='/elsewhere',
    experiment_name='moved',
    workers='localhost:8000',
    worker_bind='all',
    shared_dir='/mnt/shared',
)


def _started(run_dir, config=_BASE):
  """A run directory as a first start leaves it (the record)."""
  run_record.check_or_write(config, str(run_dir))
  return run_dir


def test_every_field_decided():
  fields = {f.name for f in attrs.fields(experiments.ExperimentConfig)}
  assert set(run_record.MAY_DIFFER) == set(ALLOWED_CHANGES)
  assert not set(CHANGES) & set(ALLOWED_CHANGES)
  assert set(CHANGES) | set(ALLOWED_CHANGES) == fields
  assert all(reason for reason in run_record.MAY_DIFFER.values())


def test_first_start_records_every_field_and_the_version(tmp_path):
  config = attrs.evolve(_BASE, dirichlet_alpha=float('inf'), seed=3)
  _started(tmp_path, config)
  with open(tmp_path / 'run_config.json') as f:
    record = json.load(f)
  assert record['tff_fedwin_version'] == version.__version__ == '0.2.0'
  assert record['dropout_masks'] == 'stateless-fingerprint-1'
  assert experiments.ExperimentConfig(**record['config']) == config
  assert record['config']['dirichlet_alpha'] == float('inf')
  assert os.listdir(tmp_path) == ['run_config.json']


@pytest.mark.parametrize('field', sorted(CHANGES))
def test_resume_with_a_number_changing_flag_is_refused(tmp_path, field):
  _started(tmp_path)
  before = (tmp_path / 'run_config.json').read_bytes()
  changed = attrs.evolve(_BASE, **{field: CHANGES[field]})
  with pytest.raises(
      experiments.RunConfigMismatchError, match=f'[(]--{field} '
  ) as info:
    run_record.check_or_write(changed, str(tmp_path))
  message = str(info.value)
  assert '\n' not in message
  was = getattr(_BASE, field)
  shown = {None: '(unset)', '': "''"}
  assert (
      f'--{field} {shown.get(was, was)} there, {CHANGES[field]} now' in message
  )
  assert (tmp_path / 'run_config.json').read_bytes() == before


def test_the_refusal_line(tmp_path):
  _started(tmp_path)
  changed = attrs.evolve(
      _BASE, client_learning_rate=0.5, dirichlet_alpha=1.0, seed=7
  )
  with pytest.raises(experiments.RunConfigMismatchError) as info:
    run_record.check_or_write(changed, str(tmp_path))
  # All three, in the class's field order, with both values.
  assert str(info.value) == (
      f'{tmp_path} holds a run started with other flags (--dirichlet_alpha '
      '0.05 there, 1.0 now; --client_learning_rate 0.05 there, 0.5 now; '
      '--seed 0 there, 7 now); to resume it pass the flags recorded in '
      f'{tmp_path}/run_config.json, or start a new run with another '
      '--experiment_name.'
  )


def test_resume_with_only_allowed_changes_passes(tmp_path):
  _started(tmp_path)
  before = (tmp_path / 'run_config.json').read_bytes()
  run_record.check_or_write(
      attrs.evolve(_BASE, **ALLOWED_CHANGES), str(tmp_path)
  )
  assert (tmp_path / 'run_config.json').read_bytes() == before


def test_a_field_the_record_lacks_is_compared_with_its_default(tmp_path):
  # A record written before `client_momentum` existed: that run had 0.0.
  _started(tmp_path)
  path = tmp_path / 'run_config.json'
  record = json.loads(path.read_text())
  del record['config']['client_momentum']
  path.write_text(json.dumps(record))
  run_record.check_or_write(_BASE, str(tmp_path))
  with pytest.raises(
      experiments.RunConfigMismatchError,
      match='--client_momentum 0.0 there, 0.9 now',
  ):
    run_record.check_or_write(
        attrs.evolve(_BASE, client_momentum=0.9), str(tmp_path)
    )


def test_a_text_run_recorded_before_the_tokenizer_flag_split_on_whitespace(
    tmp_path,
):
  # Up to 0.2.0 word-level text was split on whitespace only; a record of
  # that time has no `text_tokenizer`: it resumes only with whitespace.
  text = attrs.evolve(_BASE, task='text', data_npz=None, data_jsonl='t.jsonl')
  _started(tmp_path, text)
  path = tmp_path / 'run_config.json'
  record = json.loads(path.read_text())
  del record['config']['text_tokenizer']
  path.write_text(json.dumps(record))
  with pytest.raises(
      experiments.RunConfigMismatchError,
      match='--text_tokenizer whitespace there, words now',
  ):
    run_record.check_or_write(text, str(tmp_path))
  run_record.check_or_write(
      attrs.evolve(text, text_tokenizer='whitespace'), str(tmp_path)
  )


def test_unreadable_record_is_one_line(tmp_path):
  (tmp_path / 'run_config.json').write_text('{"config": ')
  with pytest.raises(
      experiments.RunConfigMismatchError,
      match=f'Cannot read the run record {tmp_path}/run_config.json',
  ):
    run_record.check_or_write(_BASE, str(tmp_path))


def test_first_start_records_a_new_run_id(tmp_path):
  run_id = run_record.check_or_write(_BASE, str(tmp_path / 'a'))
  with open(tmp_path / 'a' / 'run_config.json') as f:
    record = json.load(f)
  assert record['run_id'] == run_id
  assert re.fullmatch('[0-9a-f]{32}', run_id)
  assert 'run_id' not in record['config']  # Not a flag.
  # Another run, the same flags: another id.
  other = run_record.check_or_write(_BASE, str(tmp_path / 'b'))
  assert re.fullmatch('[0-9a-f]{32}', other)
  assert other != run_id


def test_resume_keeps_the_run_id(tmp_path):
  run_id = run_record.check_or_write(_BASE, str(tmp_path))
  before = (tmp_path / 'run_config.json').read_bytes()
  # A resume, also with every flag that may change (a moved run, another
  # --shared_dir): the same id, the record unchanged.
  assert run_record.check_or_write(_BASE, str(tmp_path)) == run_id
  assert (
      run_record.check_or_write(
          attrs.evolve(_BASE, **ALLOWED_CHANGES), str(tmp_path)
      )
      == run_id
  )
  assert (tmp_path / 'run_config.json').read_bytes() == before


def test_a_refused_resume_names_no_run_id(tmp_path):
  _started(tmp_path)
  with pytest.raises(
      experiments.RunConfigMismatchError,
      match='^[^\n]*[(]--seed 0 there, 7 now[)]',
  ) as info:
    run_record.check_or_write(attrs.evolve(_BASE, seed=7), str(tmp_path))
  assert 'run_id' not in str(info.value)


def test_a_record_without_run_id_gets_one_at_its_resume(tmp_path):
  # A record written before runs had an id: it resumes, and from then on
  # keeps the id it got; nothing else of the record changes.
  _started(tmp_path)
  path = tmp_path / 'run_config.json'
  old = json.loads(path.read_text())
  del old['run_id']
  path.write_text(json.dumps(old))
  run_id = run_record.check_or_write(_BASE, str(tmp_path))
  assert re.fullmatch('[0-9a-f]{32}', run_id)
  assert json.loads(path.read_text()) == dict(old, run_id=run_id)
  assert run_record.check_or_write(_BASE, str(tmp_path)) == run_id


@pytest.mark.parametrize('run_id', ['../other', '', 7, 'A' * 32])
def test_a_damaged_run_id_is_one_line(tmp_path, run_id):
  _started(tmp_path)
  path = tmp_path / 'run_config.json'
  record = json.loads(path.read_text())
  record['run_id'] = run_id
  path.write_text(json.dumps(record))
  with pytest.raises(experiments.RunConfigMismatchError) as info:
    run_record.check_or_write(_BASE, str(tmp_path))
  assert str(info.value) == (
      f'{path} records run_id {run_id!r}, not 32 hex digits; restore it, or '
      'delete it to give the run a new one.'
  )


def test_a_run_without_record_gets_a_new_id_at_each_start(tmp_path):
  # Checkpoints but no record (started before runs recorded their flags):
  # nothing is written, so each start has an id of its own.
  (tmp_path / 'checkpoints' / 'program_state_4').mkdir(parents=True)
  config = attrs.evolve(_BASE, client_shuffle_buffer=1)
  first = run_record.check_or_write(config, str(tmp_path))
  second = run_record.check_or_write(config, str(tmp_path))
  assert re.fullmatch('[0-9a-f]{32}', first)
  assert re.fullmatch('[0-9a-f]{32}', second)
  assert first != second
  assert not (tmp_path / 'run_config.json').exists()


def test_old_run_directory_resumes_with_a_warning(tmp_path, caplog):
  # Checkpoints but no record: written before the record existed. Such a
  # run shuffled by the run seed alone, so only an unshuffled one resumes.
  (tmp_path / 'checkpoints' / 'program_state_4').mkdir(parents=True)
  with caplog.at_level(logging.WARNING):
    run_record.check_or_write(
        attrs.evolve(_BASE, client_shuffle_buffer=1), str(tmp_path)
    )
  warnings = [r.getMessage() for r in caplog.records]
  assert warnings == [
      f'{tmp_path} has checkpoints but no run_config.json (started before '
      'runs recorded their flags): this resume checks only --seed, '
      '--clients_per_round and the population; pass the flags the run was '
      'started with.'
  ]
  assert not (tmp_path / 'run_config.json').exists()


# (task, model, leaf_kind) -> whether the run's model has dropout layers:
# `cnn_dropout` named, EMNIST's only model, LEAF's FEMNIST default.
DROPOUT_CONFIGS = {
    ('mnist', 'auto', 'auto'): False,
    ('mnist', 'cnn_dropout', 'auto'): True,
    ('npz', 'resnet20_gn', 'auto'): False,
    ('emnist', 'auto', 'auto'): True,
    ('leaf', 'auto', 'auto'): True,
    ('leaf', 'auto', 'femnist'): True,
    ('leaf', 'auto', 'shakespeare'): False,
    ('leaf', 'auto', 'synthetic'): False,
    ('leaf', 'cnn', 'femnist'): False,
    ('shakespeare', 'auto', 'auto'): False,
}


@pytest.mark.parametrize('fields, expected', sorted(DROPOUT_CONFIGS.items()))
def test_uses_dropout(fields, expected):
  task, model, leaf_kind = fields
  config = attrs.evolve(_BASE, task=task, model=model, leaf_kind=leaf_kind)
  assert run_record.uses_dropout(config) is expected


def _without_mask_rule(run_dir):
  # A record written before masks were recorded (Keras' stateful Dropout).
  path = run_dir / 'run_config.json'
  record = json.loads(path.read_text())
  del record['dropout_masks']
  path.write_text(json.dumps(record))


_DROPOUT = attrs.evolve(_BASE, model='cnn_dropout')
_MASKS_REFUSED = (
    "was trained with dropout masks drawn by rule 'keras-stateful'; this "
    "version uses 'stateless-fingerprint-1'"
)


def test_dropout_run_with_stateful_masks_is_refused(tmp_path):
  _started(tmp_path, _DROPOUT)
  run_record.check_or_write(_DROPOUT, str(tmp_path))
  _without_mask_rule(tmp_path)
  with pytest.raises(experiments.RunConfigMismatchError, match=_MASKS_REFUSED):
    run_record.check_or_write(_DROPOUT, str(tmp_path))


def test_run_without_dropout_resumes_across_the_mask_rule(tmp_path):
  _started(tmp_path)
  _without_mask_rule(tmp_path)
  run_record.check_or_write(_BASE, str(tmp_path))


def test_old_dropout_run_directory_is_refused(tmp_path):
  (tmp_path / 'checkpoints' / 'program_state_4').mkdir(parents=True)
  with pytest.raises(experiments.RunConfigMismatchError, match=_MASKS_REFUSED):
    run_record.check_or_write(_DROPOUT, str(tmp_path))


def test_checkpoint_rounds_read_from_version_directories(tmp_path):
  assert run_record.checkpoint_rounds(str(tmp_path)) == []
  for name in (
      'program_state_0',
      'program_state_20',
      'program_state_5',
      'program_state_x',
      'client_states',
  ):
    (tmp_path / 'checkpoints' / name).mkdir(parents=True)
  assert run_record.checkpoint_rounds(str(tmp_path)) == [0, 5, 20]


def _unavailable():
  return runtime.WorkerUnavailableError(
      'localhost:4321',
      'TFF worker localhost:4321 is unreachable: compute failed\n'
      '(UNAVAILABLE: gone). Has it died?',
  )


def test_worker_lost_names_worker_and_resume_round(tmp_path):
  for name in ('program_state_0', 'program_state_10', 'program_state_20'):
    (tmp_path / 'checkpoints' / name).mkdir(parents=True)
  error = run_record.worker_lost(
      _unavailable(), 'localhost:4321', str(tmp_path), remote=True
  )
  assert isinstance(error, errors.UserError)
  assert (error.address, error.resume_round) == ('localhost:4321', 20)
  assert str(error) == (
      'TFF worker localhost:4321 is unreachable: compute failed '
      '(UNAVAILABLE: gone). Has it died? The run stopped; a rerun resumes '
      f'from the checkpoint of round 20 in {tmp_path}/checkpoints: restart '
      'the worker at localhost:4321 (or list another in --workers) and rerun '
      'the same command.'
  )


def test_worker_lost_before_a_checkpoint_and_local(tmp_path):
  (tmp_path / 'checkpoints' / 'program_state_0').mkdir(parents=True)
  error = run_record.worker_lost(
      _unavailable(), 'localhost:4321', str(tmp_path), remote=False
  )
  assert error.resume_round == 0
  assert str(error).endswith(
      'The run stopped; no round is checkpointed yet: a rerun starts from '
      'round 1: rerun the same command (it starts a new worker).'
  )


def test_worker_lost_names_the_round_the_resume_takes(tmp_path):
  # Version 20 has a manifest but a damaged file: the resume falls back to
  # version 10, and the line says so (checkpoint_manifest.resume_round).
  checkpoints = str(tmp_path / 'checkpoints')
  for round_num in (0, 10, 20):
    version = os.path.join(checkpoints, f'program_state_{round_num}')
    os.makedirs(version)
    with open(os.path.join(version, 'saved_model.pb'), 'wb') as f:
      f.write(b'state %d' % round_num)
    checkpoint_manifest.write(checkpoints, round_num, {}, None)
  with open(
      os.path.join(checkpoints, 'program_state_20', 'saved_model.pb'), 'wb'
  ) as f:
    f.write(b'state 99')  # Same size, another CRC-32.

  error = run_record.worker_lost(
      _unavailable(), 'localhost:4321', str(tmp_path), remote=True
  )

  assert error.resume_round == 10
  assert f'resumes from the checkpoint of round 10 in {checkpoints}:' in str(
      error
  )


def _without_rule(run_dir, field):
  # A record written before the rule was recorded.
  path = run_dir / 'run_config.json'
  record = json.loads(path.read_text())
  del record[field]
  path.write_text(json.dumps(record))


# (field, config that the rule touches, config it does not, message).
_RULE_CASES = [
    (
        'client_shuffle',
        _BASE,
        attrs.evolve(_BASE, client_shuffle_buffer=1),
        "was trained with clients' examples shuffled by rule 'fixed-seed'; "
        "this version uses 'per-round-sha256-1'",
    ),
    (
        'leaf_classes',
        attrs.evolve(_BASE, task='leaf', data_dir='/d', leaf_kind='femnist'),
        attrs.evolve(_BASE, task='leaf', data_dir='/d', leaf_kind='celeba'),
        "was trained with classifier outputs sized by rule 'femnist-62'; "
        "this version uses 'from-labels-1'",
    ),
]


@pytest.mark.parametrize('field, touched, untouched, message', _RULE_CASES)
def test_a_run_under_an_older_rule_is_refused(
    tmp_path, field, touched, untouched, message
):
  for config, run_dir in (
      (touched, tmp_path / 'a'),
      (untouched, tmp_path / 'b'),
  ):
    run_dir.mkdir()
    _without_rule(_started(run_dir, config), field)
  with pytest.raises(experiments.RunConfigMismatchError, match=message):
    run_record.check_or_write(touched, str(tmp_path / 'a'))
  run_record.check_or_write(untouched, str(tmp_path / 'b'))  # Not refused.
