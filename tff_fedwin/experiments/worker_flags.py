"""`--workers` and `--shared_dir` as flags: their syntax and how they fit.

Importable without TensorFlow, so `scripts/run_experiment.py` refuses a bad
value before the heavy imports (`config.validate_config`); `context` builds the
execution context from the same parse.
"""

import re
from typing import Optional

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


def check_shared_dir_flags(
    workers: str, shared_dir: Optional[str], files_flags: tuple[str, ...]
) -> None:
  """`--shared_dir` is a path a files mode uses; remote files need it.

  Args:
    workers: `--workers` (str).
    shared_dir: `--shared_dir` (str or None).
    files_flags: The `--*_transfer` flags (strs) that resolve to files.

  Raises:
    ValueError: naming `--shared_dir`, if it is empty or no transfer is
      files; naming the files flags, `--workers` and `--shared_dir`, for
      files with `--workers=host:port,...` and no `--shared_dir`.
  """
  if shared_dir is not None and (not shared_dir.strip() or not files_flags):
    raise ValueError(
        '--shared_dir must be a directory path and is used only by the files '
        'transfer modes (--client_state_transfer, --server_state_transfer, '
        f'--client_data_transfer = files or auto); got {shared_dir!r} with '
        'none of them files.'
    )
  _, addresses = parse_workers(workers)
  if addresses and files_flags and shared_dir is None:
    listed = ', '.join(f'{flag}=files' for flag in files_flags)
    raise ValueError(
        f'{listed} with --workers={workers} needs --shared_dir=DIR, a '
        'directory the driver and every worker see at the same path (a '
        'shared mount); or set those flags to values (or auto).'
    )
