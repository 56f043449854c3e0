"""Where the workers are and how the run's data reach them, as flags.

`--workers` and `--worker_bind` (their syntax; `context` builds the execution
context from the same parse), the `--*_transfer` flags and `--shared_dir`.

A transfer flag is `values` (the state or data crosses the driver in each
call), `files` (paths the workers open) or `auto`. `auto` is `files` when the
run starts its own workers (they share its file system) or `--shared_dir`
names a directory every worker sees, and `values` when `--workers` lists
running workers, which may be on other machines, without `--shared_dir`
(docs/runtime.md, sec. 4 and 7).

Importable without TensorFlow, so `scripts/run_experiment.py` refuses a bad
value before the heavy imports (`config.validate_config`).
"""

import re
from typing import Any, Optional

from tff_fedwin import choices

_HOST = re.compile(r'^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)$')
_MAX_PORT = 65535


def parse_workers(workers: str) -> tuple[Optional[int], tuple[str, ...]]:
  """'' -> (None, ()); 'N' -> (N, ()); 'h:p,h:p' -> (None, addresses).

  A host is a name, an IPv4 address or a bracketed IPv6 address (`[::1]`); a
  port is 1..65535.

  Raises:
    ValueError: naming `--workers`, for anything else.
  """
  workers = workers.strip()
  if not workers:
    return None, ()
  allowed = (
      'empty, an integer >= 1 or a comma list of host:port with '
      f'ports 1-{_MAX_PORT}'
  )
  if workers.isdigit():
    if int(workers) < 1:
      raise ValueError(f'--workers must be {allowed}; got {workers!r}.')
    return int(workers), ()
  addresses = tuple(a.strip() for a in workers.split(','))
  for address in addresses:
    host, _, port = address.rpartition(':')
    if (
        not _HOST.match(host)
        or not port.isdigit()
        or not 1 <= int(port) <= _MAX_PORT
    ):
      raise ValueError(
          f'--workers must be {allowed}; got {address!r} in {workers!r}.'
      )
  return None, addresses


def resolve(config: Any, flag: str) -> str:
  """`'values'` or `'files'`: `config`'s `flag` (a `*_transfer` field),
  `auto` resolved as the module docstring says (`run_experiment` checks a
  `--shared_dir` before the first round)."""
  transfer = getattr(config, flag)
  if transfer != 'auto':
    return transfer
  _, addresses = parse_workers(config.workers)
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


def check_worker_flags(config: Any, problems: Any) -> None:
  """Adds a problem naming the flags if `--worker_bind` or `--shared_dir`
  does not fit `--workers` and the transfers.

  `--shared_dir` must be a path a files mode uses, and remote workers with a
  files mode need it.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    problems: The `problems.Problems` each misfit is added to.
  """
  with problems.check():
    _, addresses = parse_workers(config.workers)
    if addresses and config.worker_bind != 'loopback':
      raise ValueError(
          '--worker_bind applies to the workers this run starts; '
          '--workers lists running ones.'
      )
  shared_dir = config.shared_dir
  with problems.check():
    files_flags = files_transfer_flags(config)
    if shared_dir is not None and (not shared_dir.strip() or not files_flags):
      raise ValueError(
          '--shared_dir must be a directory path and is used only by the '
          'files transfer modes (--client_state_transfer, '
          '--server_state_transfer, --client_data_transfer = files or auto); '
          f'got {shared_dir!r} with none of them files.'
      )
    _, addresses = parse_workers(config.workers)
    if addresses and files_flags and shared_dir is None:
      listed = ', '.join(f'{flag}=files' for flag in files_flags)
      raise ValueError(
          f'{listed} with --workers={config.workers} needs --shared_dir=DIR, '
          'a directory the driver and every worker see at the same path (a '
          'shared mount); or set those flags to values (or auto).'
      )
