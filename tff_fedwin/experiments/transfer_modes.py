"""What each `--*_transfer` flag resolves to: values or files.

A transfer flag is `values` (the state or data crosses the driver in each
call), `files` (paths the workers open) or `auto`. `auto` is `files` when the
run starts its own workers (they share its file system) or `--shared_dir`
names a directory every worker sees, and `values` when `--workers` lists
running workers, which may be on other machines, without `--shared_dir`
(docs/runtime.md, sec. 4 and 7). Plain Python: no TensorFlow here.
"""

from typing import Any

from tff_fedwin import choices
from tff_fedwin.experiments import worker_flags


def client_state_transfer(config: Any) -> str:
  """`'values'` or `'files'`: `--client_state_transfer`, `auto` resolved.

  `auto` is `'files'` when this run starts its workers (they share its file
  system) or `--shared_dir` names a directory every worker sees (checked
  before the first round), and `'values'` when `--workers` lists running
  ones, which may be on other machines, without `--shared_dir`.
  """
  return _resolve_transfer(config.client_state_transfer, config)


def server_state_transfer(config: Any) -> str:
  """`'values'` or `'files'`: `--server_state_transfer`, `auto` resolved
  as `--client_state_transfer`'s (files with the workers this run starts)."""
  return _resolve_transfer(config.server_state_transfer, config)


def client_data_transfer(config: Any) -> str:
  """`'values'` or `'files'`: `--client_data_transfer`, `auto` resolved as
  `--client_state_transfer`'s (files with the workers this run starts)."""
  return _resolve_transfer(config.client_data_transfer, config)


def _resolve_transfer(transfer: str, config: Any) -> str:
  """`transfer`, or for `'auto'` `'files'` unless `--workers` lists running
  workers (which may be on other machines) and no `--shared_dir` is given;
  `run_experiment` checks a `--shared_dir` before the first round."""
  if transfer != 'auto':
    return transfer
  _, addresses = worker_flags.parse_workers(config.workers)
  return 'values' if addresses and config.shared_dir is None else 'files'


def files_transfer_flags(config: Any) -> tuple[str, ...]:
  """The `--*_transfer` flags of `config` that resolve to `'files'`.

  `--client_state_transfer` counts only with the algorithms that keep client
  states (`choices.CLIENT_STATE_ALGORITHMS`).
  """
  found = []
  if config.algorithm in choices.CLIENT_STATE_ALGORITHMS and (
      client_state_transfer(config) == 'files'
  ):
    found.append('--client_state_transfer')
  for flag, resolve in (
      ('--server_state_transfer', server_state_transfer),
      ('--client_data_transfer', client_data_transfer),
  ):
    if resolve(config) == 'files':
      found.append(flag)
  return tuple(found)
