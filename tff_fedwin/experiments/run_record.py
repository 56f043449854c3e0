"""What a run directory records about its run: the configuration, the resume.

At its first start a run writes `run_config.json` (every `ExperimentConfig`
field, the package version and the `RULES` that decide its numbers beyond
its flags: dropout masks, client shuffles, LEAF class counts); every resume
compares its configuration with it (`check_or_write`) before any TFF work,
and refuses a field that changes the numbers with one line naming every
differing flag, and a run trained under another of those rules. The fields that may differ are `MAY_DIFFER`, each with its reason.
The record also holds the run's id (`RUN_ID_KEY`, a uuid4 hex made at the
first start and kept by every resume; not a flag, never compared): it names
the run's transfer directory in `--shared_dir` (`registry.transfer_dirs`).
`checkpoint_rounds` reads the rounds a rerun can resume from; `worker_lost`
turns a dead worker into one line saying from which round a rerun goes on.
"""

import json
import os
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from absl import logging
import attrs

from tff_fedwin import choices
from tff_fedwin import errors
from tff_fedwin import version
from tff_fedwin.training import checkpoint_manifest as manifest
from tff_fedwin.training import outputs

RECORD_JSON = 'run_config.json'
# The record's key of the run id: a run's own, kept on resume, new for a fork.
RUN_ID_KEY = 'run_id'
_RUN_ID = re.compile('[0-9a-f]{32}')

# The `ExperimentConfig` fields a resume may change, with the reason. Every
# other field must equal the recorded one.
MAY_DIFFER: Mapping[str, str] = {
    'total_rounds': (
        'the same rounds, more or fewer of them (the checkpoints refuse a '
        'total below the newest checkpoint round)'
    ),
    'rounds_per_checkpoint': (
        'when checkpoints are written, not what is trained: a resume from '
        'any checkpoint equals an uninterrupted run (docs/design.md sec. 5)'
    ),
    'summary_last_n': (
        'summary.json only, computed from metrics.csv at the end of each run'
    ),
    'client_state_transfer': (
        'how the client states reach the workers, bit for bit the same '
        '(docs/design.md sec. 3.3); per-round files, not checkpoints'
    ),
    'server_state_transfer': (
        'how the server state travels, bit for bit the same '
        "(docs/performance.md, 'The client loop and the worker'); per-round "
        'files, not checkpoints'
    ),
    'client_data_transfer': (
        "how the clients' data reach the workers, the same datasets "
        "(docs/performance.md, 'The client loop and the worker'); rewritten at "
        'every start'
    ),
    'cache_dir': "where TFF's published dataset files are read from",
    'max_npz_bytes': 'a cap on what is read, not on what is trained',
    'root_output_dir': 'names the run directory (a moved run resumes)',
    'experiment_name': 'names the run directory (a moved run resumes)',
    'workers': (
        'where the run is computed (a dead worker can be replaced by another '
        "address); another number of workers adds the clients' sums in "
        'another order, so the numbers may then differ in their last bits '
        "(docs/runtime.md, 'Several workers')"
    ),
    'worker_bind': 'which interfaces local workers listen on',
    'shared_dir': (
        'where the files transfer modes put their per-round files, not what '
        'they hold (the same bits as values); none is a checkpoint: a resume '
        'writes them again from the checkpoint (docs/runtime.md sec. 7)'
    ),
}

# Fields added after runs began to record their flags whose default is not
# what the runs before them did: a record without the field reads as this.
ABSENT_MEANS: Mapping[str, Any] = {
    # Word-level text was split on whitespace only up to version 0.2.0.
    'text_tokenizer': 'whitespace',
}


class RunConfigMismatchError(errors.RunDirectoryError, ValueError):
  """A resume's configuration differs from the one its run was started with."""


WorkerLostError = errors.WorkerLostError


class Difference(NamedTuple):
  """A field whose recorded and current values differ."""

  field: str
  recorded: Any
  current: Any


def record_path(run_dir: str) -> str:
  return os.path.join(run_dir, RECORD_JSON)


def checkpoint_rounds(run_dir: str) -> list[int]:
  """The rounds of the program state versions in `run_dir/checkpoints`.

  Read from the version directories' names (`program_state_<round>`),
  ascending; [] if there are none.
  """
  return manifest.version_rounds(os.path.join(run_dir, outputs.CHECKPOINT_DIR))


def _as_json(value: Any) -> Any:
  """`value` as it reads back from JSON (tuples as lists, and so on)."""
  return json.loads(json.dumps(value))


def new_run_id() -> str:
  """A fresh run id: 32 hex digits (uuid4, 122 random bits)."""
  return uuid.uuid4().hex


def record_of(config: Any, run_id: str) -> dict[str, Any]:
  """The record of `config` (an attrs instance): every field, the versions
  and the run id."""
  return dict(
      config=_as_json(attrs.asdict(config)),
      tff_fedwin_version=version.__version__,
      **{rule.field: rule.current for rule in RULES},
      **{RUN_ID_KEY: run_id},
  )


def uses_dropout(config: Any) -> bool:
  """Whether the run's model has dropout layers (`choices.DROPOUT_MODELS`).

  `--task=emnist` always trains `cnn_dropout`; `--task=leaf` does by default
  unless the directory is declared another kind than FEMNIST.
  """
  if config.model in choices.DROPOUT_MODELS or config.task == 'emnist':
    return True
  return (
      config.task in choices.DROPOUT_DEFAULT_TASKS
      and config.model == 'auto'
      and config.leaf_kind in ('auto', 'femnist')
  )


def shuffles_clients(config: Any) -> bool:
  """Whether the run shuffles its clients' examples by its own rule.

  Every task but `stackoverflow` (TFF's unseeded shuffle), unless
  `--client_shuffle_buffer=1` keeps each client's order.
  """
  return config.task != 'stackoverflow' and config.client_shuffle_buffer != 1


def sizes_leaf_classes(config: Any) -> bool:
  """Whether the run may hold FEMNIST-style LEAF rows (`--task=leaf`)."""
  return config.task == 'leaf' and config.leaf_kind in ('auto', 'femnist')


class Rule(NamedTuple):
  """A rule of the package that decides a run's numbers beyond its flags.

  Attributes:
    field: The record's key.
    current: This version's rule.
    absent: What a record without the key (or no record) was trained with.
    applies: `config -> bool`: whether the rule touches the run.
    what: What the rule decides, for the message.
    section: Where docs/design.md describes it.
  """

  field: str
  current: str
  absent: str
  applies: Callable[[Any], bool]
  what: str
  section: str


RULES = (
    Rule(
        'dropout_masks',
        version.DROPOUT_MASKS,
        version.STATEFUL_DROPOUT_MASKS,
        uses_dropout,
        'dropout masks drawn',
        'sec. 5.4',
    ),
    Rule(
        'client_shuffle',
        version.CLIENT_SHUFFLE,
        version.FIXED_CLIENT_SHUFFLE,
        shuffles_clients,
        "clients' examples shuffled",
        'sec. 5.2',
    ),
    Rule(
        'leaf_classes',
        version.LEAF_CLASSES,
        version.FIXED_LEAF_CLASSES,
        sizes_leaf_classes,
        'classifier outputs sized',
        'sec. 5.2',
    ),
)


def _check_rules(record: Mapping[str, Any], config: Any, run_dir: str):
  """Refuses a run whose record names another rule that touches it.

  Raises:
    RunConfigMismatchError: For the first rule of `RULES` that applies to
      `config` and whose recorded value (`absent` when the record has none)
      is not this version's.
  """
  for rule in RULES:
    recorded = record.get(rule.field, rule.absent)
    if recorded == rule.current or not rule.applies(config):
      continue
    raise RunConfigMismatchError(
        f"{run_dir} was trained with {rule.what} by rule '{recorded}'; "
        f"this version uses '{rule.current}' (docs/design.md "
        f'{rule.section}), so its rounds would not continue that run: finish '
        'it with the version that started it, or start a new run with '
        'another --experiment_name.'
    )


def differences(recorded: Mapping[str, Any], config: Any) -> list[Difference]:
  """The fields of `config` outside `MAY_DIFFER` that differ from `recorded`.

  Args:
    recorded: The recorded fields (`record_of(...)['config']`). A field
      missing there (added to the class after the record was written) is
      compared with its `ABSENT_MEANS` value, else the field's default.
    config: The current configuration (an attrs instance).
  """
  found = []
  for field in attrs.fields(type(config)):
    if field.name in MAY_DIFFER:
      continue
    current = _as_json(getattr(config, field.name))
    was = recorded.get(
        field.name, ABSENT_MEANS.get(field.name, _as_json(field.default))
    )
    if was != current:
      found.append(Difference(field.name, was, current))
  return found


def _shown(value: Any) -> str:
  if value is None:
    return '(unset)'
  if value == '':
    return "''"
  return str(value)


def mismatch_message(run_dir: str, found: list[Difference]) -> str:
  """One line naming every differing flag with both values, and the way out."""
  listed = '; '.join(
      f'--{d.field} {_shown(d.recorded)} there, {_shown(d.current)} now'
      for d in found
  )
  return (
      f'{run_dir} holds a run started with other flags ({listed}); to resume '
      f'it pass the flags recorded in {record_path(run_dir)}, or start a new '
      'run with another --experiment_name.'
  )


def _read(run_dir: str) -> Mapping[str, Any]:
  """The whole record (a dict with a dict `config`), or one line."""
  path = record_path(run_dir)
  try:
    with open(path) as f:
      record = json.load(f)
    if not isinstance(record['config'], dict):
      raise TypeError('config is not an object')
    return record
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise RunConfigMismatchError(
        f'Cannot read the run record {path} ({e!r}); restore it, or move it '
        'aside to resume with only the seed, clients per round and '
        'population checked.'
    ) from None


def check_or_write(config: Any, run_dir: str) -> str:
  """At a first start writes the record; at a resume compares with it.

  Returns the run's id (`RUN_ID_KEY`): a new one written with the record at
  a first start, the recorded one at a resume. A record written before runs
  had an id gets a new one, added to it (nothing else of it changes): the
  id names only per-round files no checkpoint needs. A run directory with
  checkpoints but no record (written before the record existed) resumes
  with a warning that only the seed, clients per round and population are
  checked (by `training.checkpoints`); no record is written then, as its
  first configuration is not known, and each start gets a new id.

  Raises:
    RunConfigMismatchError: If a field outside `MAY_DIFFER` differs, or
      a rule of `RULES` that touches the run differs from the recorded one
      (a record without it, or no record: the rule's `absent` value), or
      the recorded run id is not 32 hex digits.
  """
  path = record_path(run_dir)
  if os.path.exists(path):
    record = _read(run_dir)
    found = differences(record['config'], config)
    if found:
      raise RunConfigMismatchError(mismatch_message(run_dir, found))
    _check_rules(record, config, run_dir)
    if RUN_ID_KEY in record:
      run_id = record[RUN_ID_KEY]
      if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise RunConfigMismatchError(
            f'{path} records run_id {run_id!r}, not 32 hex digits; restore '
            'it, or delete it to give the run a new one.'
        )
      return run_id
    run_id = new_run_id()
    outputs.write_json_atomically({**record, RUN_ID_KEY: run_id}, path)
    logging.info(
        '%s had no run id (started before runs recorded one): it is now %s.',
        path,
        run_id,
    )
    return run_id
  if checkpoint_rounds(run_dir):
    _check_rules({}, config, run_dir)
    logging.warning(
        '%s has checkpoints but no %s (started before runs recorded their '
        'flags): this resume checks only --seed, --clients_per_round and the '
        'population; pass the flags the run was started with.',
        run_dir,
        RECORD_JSON,
    )
    return new_run_id()
  os.makedirs(run_dir, exist_ok=True)
  run_id = new_run_id()
  outputs.write_json_atomically(record_of(config, run_id), path)
  return run_id


def worker_lost(error: Exception, address: str, run_dir: str, remote: bool):
  """The one-line `WorkerLostError` of a dead worker during the run.

  Args:
    error: The `runtime.WorkerUnavailableError` (its message, one line).
    address: The worker's `host:port`.
    run_dir: The run directory (its checkpoints say where a rerun resumes).
    remote: Whether the worker was listed by --workers (else the run started
      it, and a rerun starts a new one).
  """
  checkpoint_dir = os.path.join(run_dir, outputs.CHECKPOINT_DIR)
  resume_round = manifest.resume_round(checkpoint_dir) or 0
  if resume_round:
    where = (
        f'a rerun resumes from the checkpoint of round {resume_round} in '
        f'{os.path.join(run_dir, outputs.CHECKPOINT_DIR)}'
    )
  else:
    where = 'no round is checkpointed yet: a rerun starts from round 1'
  action = (
      f'restart the worker at {address} (or list another in --workers) and '
      'rerun the same command'
      if remote
      else 'rerun the same command (it starts a new worker)'
  )
  reason = ' '.join(str(error).split())
  return WorkerLostError(
      f'{reason} The run stopped; {where}: {action}.', address, resume_round
  )
