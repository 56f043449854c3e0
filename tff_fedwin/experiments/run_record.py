"""What a run directory records about its run: the configuration, the resume.

At its first start a run writes `run_config.json` (every `ExperimentConfig`
field, the package version and the rule that draws dropout masks); every
resume compares its configuration with it (`check_or_write`) before any TFF
work, and refuses a field that changes the numbers with one line naming every
differing flag, and a run with dropout whose masks were drawn by another
rule. The fields that may differ are `MAY_DIFFER`, each with its reason.
`checkpoint_rounds` reads the rounds a rerun can resume from; `worker_lost`
turns a dead worker into one line saying from which round a rerun goes on.
"""

import json
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from absl import logging
import attrs

from tff_fedwin import choices
from tff_fedwin import errors
from tff_fedwin import version
from tff_fedwin.training import checkpoint_manifest as manifest
from tff_fedwin.training import outputs

RECORD_JSON = 'run_config.json'

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
        'how the server state travels, bit for bit the same (docs/design.md '
        'sec. 7.4); per-round files, not checkpoints'
    ),
    'client_data_transfer': (
        "how the clients' data reach the workers, the same datasets "
        '(docs/design.md sec. 7.4); rewritten at every start'
    ),
    'cache_dir': "where TFF's published dataset files are read from",
    'root_output_dir': 'names the run directory (a moved run resumes)',
    'experiment_name': 'names the run directory (a moved run resumes)',
    'workers': (
        'where the run is computed (a dead worker can be replaced by another '
        "address); another number of workers adds the clients' sums in "
        'another order, so the numbers may then differ in their last bits '
        '(docs/design.md sec. 6.5)'
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


def record_of(config: Any) -> dict[str, Any]:
  """The record of `config` (an attrs instance): every field, the versions."""
  return dict(
      config=_as_json(attrs.asdict(config)),
      tff_fedwin_version=version.__version__,
      dropout_masks=version.DROPOUT_MASKS,
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
      and getattr(config, 'leaf_kind', 'auto') in ('auto', 'femnist')
  )


def _check_dropout_masks(record: Mapping[str, Any], config: Any, run_dir: str):
  """Refuses a dropout run whose record names another mask rule.

  Raises:
    RunConfigMismatchError: If `uses_dropout(config)` and the record's
      `dropout_masks` (`version.STATEFUL_DROPOUT_MASKS` when it has none)
      is not `version.DROPOUT_MASKS`.
  """
  recorded = record.get('dropout_masks', version.STATEFUL_DROPOUT_MASKS)
  if recorded == version.DROPOUT_MASKS or not uses_dropout(config):
    return
  raise RunConfigMismatchError(
      f"{run_dir} was trained with dropout masks drawn by rule '{recorded}'; "
      f"this version draws them by '{version.DROPOUT_MASKS}' (docs/design.md "
      'sec. 5.4), so its rounds would not continue that run: finish it with the '
      'version that started it, or start a new run with another '
      '--experiment_name.'
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
    default = field.default
    if isinstance(default, attrs.Factory):
      default = default.factory()
    was = recorded.get(
        field.name, ABSENT_MEANS.get(field.name, _as_json(default))
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


def check_or_write(config: Any, run_dir: str) -> None:
  """At a first start writes the record; at a resume compares with it.

  A run directory with checkpoints but no record (written before the record
  existed) resumes with a warning that only the seed, clients per round and
  population are checked (by `training.checkpoints`); no record is written
  then, as its first configuration is not known.

  Raises:
    RunConfigMismatchError: If a field outside `MAY_DIFFER` differs, or
      the run has dropout and its masks were drawn by another rule (a
      record without one, or no record: Keras' stateful masks).
  """
  path = record_path(run_dir)
  if os.path.exists(path):
    record = _read(run_dir)
    found = differences(record['config'], config)
    if found:
      raise RunConfigMismatchError(mismatch_message(run_dir, found))
    _check_dropout_masks(record, config, run_dir)
    return
  if checkpoint_rounds(run_dir):
    _check_dropout_masks({}, config, run_dir)
    logging.warning(
        '%s has checkpoints but no %s (started before runs recorded their '
        'flags): this resume checks only --seed, --clients_per_round and the '
        'population; pass the flags the run was started with.',
        run_dir,
        RECORD_JSON,
    )
    return
  os.makedirs(run_dir, exist_ok=True)
  outputs.write_json_atomically(record_of(config), path)


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
  resume_round = (
      manifest.resume_round(
          checkpoint_dir,
          os.path.join(run_dir, outputs.METRICS_CSV),
          os.path.join(run_dir, outputs.PER_CLIENT_CSV),
      )
      or 0
  )
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
