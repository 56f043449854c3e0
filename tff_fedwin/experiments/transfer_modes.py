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


def resolve(config: Any, flag: str) -> str:
  """`'values'` or `'files'`: `config`'s `flag` (a `*_transfer` field),
  `auto` resolved as the module docstring says (`run_experiment` checks a
  `--shared_dir` before the first round)."""
  transfer = getattr(config, flag)
  if transfer != 'auto':
    return transfer
  _, addresses = worker_flags.parse_workers(config.workers)
  return 'values' if addresses and config.shared_dir is None else 'files'


def files_transfer_flags(config: Any) -> tuple[str, ...]:
  """The `--*_transfer` flags of `config` that resolve to `'files'`.

  `--client_state_transfer` counts only with the algorithms that keep client
  states (`choices.CLIENT_STATE_ALGORITHMS`).
  """
  flags = ('server_state_transfer', 'client_data_transfer')
  if config.algorithm in choices.CLIENT_STATE_ALGORITHMS:
    flags = ('client_state_transfer', *flags)
  return tuple(
      f'--{flag}' for flag in flags if resolve(config, flag) == 'files'
  )
