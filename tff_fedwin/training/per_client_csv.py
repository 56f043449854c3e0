"""`per_client_metrics.csv`: one row per (eval round, test client), appended.

Written when `evaluate_fn` evaluates each test client (`--eval_per_client`,
`training.metrics.per_client_metrics_of`). Columns: `round_num`, `client_id`,
`num_examples` (the client's test examples), `num_counted` (its positions
the accuracy counts: examples, or non-pad targets of sequence tasks), then
`<model>/loss` and `<model>/accuracy` for each evaluated model (`window`,
`global`, extra windows), empty where a client has nothing to score.

The file only grows: an eval round's rows are appended in one write and
fsynced before the round's checkpoint. A checkpoint's manifest records the
file's size and CRC-32 (`checkpoint_manifest`); a resume from round t checks
that prefix (`check`) and cuts the file back to it (`roll_back`), which drops
the rows of later rounds and any partial row of a killed write.
"""

import csv
import io
import os
import zlib
from typing import Optional

import numpy as np

from tff_fedwin.training import client_metrics
from tff_fedwin.training import row_files

MANIFEST_KEY = 'per_client_csv'
_CHUNK = 1 << 22


def _rows_text(
    round_num: int, clients: client_metrics.ClientSums, header: bool
) -> str:
  loss, accuracy = client_metrics.client_loss_and_accuracy(clients.sums)
  counted = clients.sums[:, 0, client_metrics.COUNTED]
  out = io.StringIO()
  writer = csv.writer(out, lineterminator='\n')
  if header:
    columns = ['round_num', 'client_id', 'num_examples', 'num_counted']
    for prefix in clients.prefixes:
      columns += [f'{prefix}/loss', f'{prefix}/accuracy']
    writer.writerow(columns)
  for i, client_id in enumerate(clients.client_ids):
    row = [round_num, client_id, int(clients.num_examples[i]), int(counted[i])]
    for j in range(len(clients.prefixes)):
      row += [_cell(loss[i, j]), _cell(accuracy[i, j])]
    writer.writerow(row)
  return out.getvalue()


def _cell(value: float) -> str:
  return '' if np.isnan(value) else repr(float(value))


def append(
    path: str, round_num: int, clients: client_metrics.ClientSums
) -> None:
  """Appends round t's rows (and the header to an empty file), fsynced."""
  fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    header = os.fstat(fd).st_size == 0
    data = _rows_text(round_num, clients, header).encode()
    while data:
      data = data[os.write(fd, data) :]
    os.fsync(fd)
  finally:
    os.close(fd)


def entry(path: str) -> list[int]:
  """The manifest's `[size, CRC-32]` of the file now (`[0, 0]` if none).

  The file and its directory are fsynced first: the manifest that vouches
  for them is made durable after them.
  """
  if not os.path.exists(path):
    return [0, 0]
  row_files.fsync_path(path)
  row_files.fsync_path(os.path.dirname(os.path.abspath(path)))
  size, crc = 0, 0
  with open(path, 'rb') as f:
    while chunk := f.read(_CHUNK):
      size, crc = size + len(chunk), zlib.crc32(chunk, crc)
  return [size, crc]


def check(path: Optional[str], listed: list[int]) -> Optional[str]:
  """None if the file's first `size` bytes have the listed CRC, else why."""
  if path is None:
    return None
  size, crc = listed  # A (size, CRC-32) pair (`checkpoint_manifest.read`).
  actual_size = os.path.getsize(path) if os.path.exists(path) else 0
  if actual_size < size:
    return f'{path} is shorter ({actual_size} bytes) than listed ({size})'
  actual, left = 0, size
  with open(path, 'rb') if size else io.BytesIO() as f:
    while left:
      chunk = f.read(min(left, _CHUNK))
      actual, left = zlib.crc32(chunk, actual), left - len(chunk)
  if actual != crc:
    return f'checksum mismatch of the first {size} bytes of {path}'
  return None


def roll_back(path: Optional[str], listed: list[int]) -> None:
  """Cuts the file back to the listed size (a checked version's)."""
  if path is None or not os.path.exists(path):
    return
  if os.path.getsize(path) != listed[0]:
    os.truncate(path, listed[0])
    row_files.fsync_path(path)
