"""metrics.csv against the checkpoints: digests, a copy per version, restore.

A checkpoint of round t vouches for metrics.csv's rows 1..t twice: its
manifest holds their digest (`csv_digest`), and its version directory holds
a copy of them, `metrics_rows.csv` (`write_copy`), listed with its CRC-32 like
every file of the version. metrics.csv is written by TFF's
`tff.program.CSVFileReleaseManager` and may be lost, edited or torn (a full
disk, a power loss, a spreadsheet): that is no damage of the model or the
client states. A resume from version t then restores the rows from the copy
(`restore`, the file found is moved to `damaged/`); only a version written
before the copies existed has nothing to restore them from, and the resume
stops in one line (docs/design.md sec. 5.3.1).
"""

import csv
import json
import os
import shutil
import zlib
from typing import Any, Optional

from absl import logging

from tff_fedwin import errors
from tff_fedwin.training import client_states as client_states_lib
from tff_fedwin.training import per_client_csv as per_client_csv_lib
from tff_fedwin.training import set_aside

COPY = 'metrics_rows.csv'


def _rows_and_columns(
    csv_path: Optional[str], round_num: int
) -> tuple[list[dict[str, str]], list[str]]:
  """Rows 1..t of the CSV in round order, and its columns ([] if none)."""
  if csv_path is None or not os.path.exists(csv_path):
    return [], []
  with open(csv_path, newline='') as f:
    reader = csv.DictReader(f)
    rows = [r for r in reader if int(r['round_num']) <= round_num]
    columns = list(reader.fieldnames or [])
  rows.sort(key=lambda row: int(row['round_num']))
  return rows, columns


def csv_digest(csv_path: Optional[str], round_num: int) -> dict[str, int]:
  """Rows 1..t of metrics.csv: their count and a CRC-32 of their values.

  Over the non-empty values of each row, not the file's bytes: the CSV is
  rewritten with more columns when eval columns first appear.
  """
  rows, _ = _rows_and_columns(csv_path, round_num)
  crc = 0
  for row in rows:
    items = sorted((k, v) for k, v in row.items() if v not in (None, ''))
    crc = zlib.crc32(json.dumps(items).encode(), crc)
  return {'rows': len(rows), 'crc32': crc}


def check_csv(metrics_csv: Optional[str], manifest: Any) -> Optional[str]:
  """None if metrics.csv holds the manifest's rows 1..t unchanged."""
  if metrics_csv is None:
    return None
  expected = manifest['metrics_csv']
  try:
    actual = csv_digest(metrics_csv, int(manifest['round_num']))
  except (OSError, ValueError, KeyError, TypeError, csv.Error) as e:
    return f'{metrics_csv} cannot be read ({e})'
  if actual != expected:
    return (
        f'{metrics_csv} rows 1..{manifest["round_num"]} differ from those '
        f'of the checkpoint ({actual["rows"]} rows, {expected["rows"]} listed)'
    )
  return None


def _write_rows(path: str, rows: list[dict[str, str]], columns: list[str]):
  def write(f):
    if columns:
      writer = csv.DictWriter(f, fieldnames=columns)
      writer.writeheader()
      writer.writerows(rows)

  client_states_lib.atomic_write(path, write, binary=False)


def roll_back_csv(csv_path: Optional[str], round_num: int) -> None:
  """Drops the rows after round t from metrics.csv (atomically)."""
  if csv_path is None or not os.path.exists(csv_path):
    return
  with open(csv_path, newline='') as f:
    reader = csv.DictReader(f)
    columns = list(reader.fieldnames or ['round_num'])
    rows = list(reader)
  kept = [row for row in rows if int(row['round_num']) <= round_num]
  if len(kept) != len(rows):
    _write_rows(csv_path, kept, columns)


def write_copy(
    metrics_csv: Optional[str], version_directory: str, round_num: int
) -> None:
  """Writes rows 1..t of metrics.csv to `<version dir>/metrics_rows.csv`.

  An empty file when metrics.csv has no rows yet (or no `metrics_csv`).
  """
  rows, columns = _rows_and_columns(metrics_csv, round_num)
  _write_rows(os.path.join(version_directory, COPY), rows, columns)


def has_copy(manifest: Any, round_num: int) -> bool:
  """Whether version t's manifest lists its copy of the rows."""
  return f'program_state_{round_num}/{COPY}' in manifest.get('files', {})


def restore(
    metrics_csv: str, version_directory: str, run_dir: str
) -> Optional[str]:
  """Replaces metrics.csv by the version's copy of rows 1..t.

  The file found (if any) is moved to `<run dir>/damaged/` first, never
  deleted; returns where it went (None if there was no file).
  """
  aside = None
  if os.path.lexists(metrics_csv):
    aside = set_aside.target(run_dir, os.path.basename(metrics_csv))
    os.replace(metrics_csv, aside)
  copy = os.path.join(version_directory, COPY)
  if os.path.getsize(copy):

    def write(f):
      with open(copy, 'rb') as source:
        shutil.copyfileobj(source, f)

    client_states_lib.atomic_write(metrics_csv, write, binary=True)
    os.chmod(metrics_csv, 0o644)
  return aside


class RowsFileError(errors.RunDirectoryError, ValueError):
  """A rows file disagrees with the checkpoint and cannot be restored."""


def check_rows(
    manifest: Any,
    metrics_csv: Optional[str],
    per_client_csv: Optional[str],
) -> None:
  """Raises `RowsFileError` unless the rows files of the run can follow
  version t (`manifest`; None: a legacy version, not checked).

  metrics.csv can when it agrees with the version or the version keeps a
  copy of its rows; per_client_metrics.csv when it starts as listed. A
  missing file can too: the run goes on without the rows it held (warned).
  """
  if manifest is None:
    return
  round_num = int(manifest['round_num'])
  problem = check_csv(metrics_csv, manifest)
  if problem and not has_copy(manifest, round_num):
    _refuse_or_warn(
        metrics_csv,
        problem,
        f'the checkpoint of round {round_num} was written before checkpoints '
        f'kept a copy of the rows; restore {metrics_csv} or move it aside to '
        f'resume without rows 1..{round_num}',
    )
  problem = per_client_csv_lib.check(
      per_client_csv, manifest.get(per_client_csv_lib.MANIFEST_KEY, [0, 0])
  )
  if problem and per_client_csv_lib.MANIFEST_KEY in manifest:
    _refuse_or_warn(
        per_client_csv,
        problem,
        f'restore it, or move it aside to resume with per-client rows from '
        f'round {round_num + 1} on',
    )


def _refuse_or_warn(path: str, problem: str, how: str) -> None:
  if os.path.exists(path):
    raise RowsFileError(
        f'{path} disagrees with the checkpoint ({problem}); {how}. Nothing '
        'was moved.'
    )
  logging.warning('%s is missing: the run goes on without its rows.', path)


def restore_rows(
    manifest: Any,
    round_num: int,
    metrics_csv: Optional[str],
    per_client_csv: Optional[str],
    checkpoint_dir: str,
) -> None:
  """Makes the rows files those of version t (`check_rows` passed).

  metrics.csv: restored from the version's copy if it disagrees
  (`restore`, with a warning), else cut to rows 1..t;
  per_client_metrics.csv: cut back to its size at t.
  """
  if metrics_csv is not None:
    if (
        manifest is not None
        and has_copy(manifest, round_num)
        and check_csv(metrics_csv, manifest)
    ):
      version_directory = os.path.join(
          checkpoint_dir, f'program_state_{round_num}'
      )
      run_dir = os.path.dirname(os.path.abspath(checkpoint_dir))
      aside = restore(metrics_csv, version_directory, run_dir)
      logging.warning(
          '%s disagreed with the checkpoint of round %d: its rows 1..%d are '
          'restored from the checkpoint%s.',
          metrics_csv,
          round_num,
          round_num,
          f' (the file found is in {aside})' if aside else '',
      )
    else:
      roll_back_csv(metrics_csv, round_num)
  if (
      manifest is not None
      and per_client_csv is not None
      and per_client_csv_lib.MANIFEST_KEY in manifest
  ):
    per_client_csv_lib.roll_back(
        per_client_csv, manifest[per_client_csv_lib.MANIFEST_KEY]
    )
