"""A FEMNIST-shaped synthetic LEAF directory, and the start it costs.

`write_synthetic_femnist` writes LEAF's layout at FEMNIST's size (Caldas et
al. 2018, Table 1: 3,550 writers, 805,263 examples; LEAF's `preprocess.sh`
writes 36 `all_data_<i>` files): users of lognormal sizes, LEAF's split by
sample (90% train, at least one example in each split, as LEAF's
`split_data.py`), rows of 784 floats written as `json.dump` writes Python
floats (LEAF's writer), mostly background 1.0 and otherwise `k / 255`. Rows
come from a pool of `pool_rows` distinct images, so writing takes minutes,
not an hour; parsing them costs the same as distinct rows.

`measure_start` runs one start (`tff_fedwin.tasks.leaf.leaf_task`, one
client's dataset and one test batch read) in a fresh Python process and
reports its wall time and the process's peak RSS (VmHWM): the first start
converts the JSON, later ones find the cache (scripts/benchmark_leaf.py).
"""

import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Optional

import attrs
import numpy as np

# The checkout's root, where the `benchmarks` package sits.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FEMNIST_USERS = 3500
FEMNIST_EXAMPLES = 800_000
LEAF_FILES = 36
_MB = 2**20


@attrs.frozen
class SyntheticLeaf:
  """What `write_synthetic_femnist` wrote."""

  root: str
  num_users: int
  num_train_examples: int
  num_test_examples: int
  json_bytes: int


def _row_pool(rng, pool_rows: int, background: float) -> list[str]:
  """`pool_rows` rows of 784 values as JSON text (Python float reprs)."""
  values = [repr(k / 255.0) for k in range(256)]
  rows = []
  for _ in range(pool_rows):
    levels = rng.integers(0, 255, size=784)
    levels[rng.random(784) < background] = 255  # 255 / 255 = 1.0.
    rows.append('[' + ', '.join(values[k] for k in levels) + ']')
  return rows


def _user_sizes(rng, num_users: int, num_examples: int) -> np.ndarray:
  """Lognormal sizes, each >= 2, summing to `num_examples`."""
  weights = rng.lognormal(0.0, 0.5, size=num_users)
  sizes = 2 + np.floor(weights / weights.sum() * (num_examples - 2 * num_users))
  sizes[: int(num_examples - sizes.sum())] += 1
  return sizes.astype(np.int64)


def _write_file(path, users, sizes, pool, rng) -> None:
  """One LEAF file of `users` with `sizes` examples each, streamed."""
  with open(path, 'w') as f:
    f.write('{"users": ' + json.dumps(users))
    f.write(', "num_samples": ' + json.dumps([int(n) for n in sizes]))
    f.write(', "user_data": {')
    for i, (user, n) in enumerate(zip(users, sizes)):
      rows = rng.integers(0, len(pool), size=n)
      labels = rng.integers(0, 62, size=n).tolist()
      f.write(', ' if i else '')
      f.write(json.dumps(user) + ': {"x": [')
      f.write(', '.join(pool[r] for r in rows))
      f.write('], "y": ' + json.dumps(labels) + '}')
    f.write('}}')


def write_synthetic_femnist(
    root: str,
    *,
    num_users: int = FEMNIST_USERS,
    num_examples: int = FEMNIST_EXAMPLES,
    num_files: int = LEAF_FILES,
    pool_rows: int = 2000,
    background: float = 0.8,
    seed: int = 0,
) -> SyntheticLeaf:
  """Writes `root/train/*.json` and `root/test/*.json` (see the docstring).

  Args:
    root: The directory to write (created).
    num_users: Writers, >= 1.
    num_examples: Examples over both splits, >= 2 * num_users.
    num_files: Files per split (users split evenly over them).
    pool_rows: Distinct images the rows are drawn from.
    background: Fraction of 1.0 pixels in each image.
    seed: Seeds sizes, images and labels.

  Returns:
    A `SyntheticLeaf`.

  Raises:
    ValueError: If the sizes do not fit.
  """
  if num_users < 1 or num_files < 1 or num_examples < 2 * num_users:
    raise ValueError(
        'write_synthetic_femnist needs num_users >= 1, num_files >= 1 and '
        f'num_examples >= 2 * num_users; got {num_users}, {num_files}, '
        f'{num_examples}.'
    )
  rng = np.random.default_rng(seed)
  pool = _row_pool(rng, pool_rows, background)
  sizes = _user_sizes(rng, num_users, num_examples)
  train_sizes = np.maximum(1, (0.9 * sizes).astype(np.int64))
  test_sizes = sizes - train_sizes
  users = [f'f{i:04d}_{i % 100:02d}' for i in range(num_users)]
  json_bytes = 0
  for split, split_sizes in (('train', train_sizes), ('test', test_sizes)):
    os.makedirs(os.path.join(root, split), exist_ok=True)
    for j, part in enumerate(np.array_split(np.arange(num_users), num_files)):
      if not part.size:
        continue
      path = os.path.join(
          root, split, f'all_data_{j}_niid_0_keep_0_{split}_9.json'
      )
      _write_file(path, [users[i] for i in part], split_sizes[part], pool, rng)
      json_bytes += os.path.getsize(path)
  return SyntheticLeaf(
      root,
      num_users,
      int(train_sizes.sum()),
      int(test_sizes.sum()),
      json_bytes,
  )


def directory_bytes(path: str) -> int:
  """Bytes of the files under `path`."""
  return sum(
      os.path.getsize(os.path.join(d, name))
      for d, _, names in os.walk(path)
      for name in names
  )


def _start(data_dir: str, cache_dir: str) -> dict[str, Any]:
  """One start in this process (the child of `measure_start`).

  As `scripts/run_experiment.py` starts: the data files read and converted
  before TensorFlow is imported (`tasks.data_files`), then the task built
  from them (`<cache_dir>/leaf`, as `--cache_dir`).
  """
  # pylint: disable=g-import-not-at-top
  from tff_fedwin.tasks import data_files

  started = time.perf_counter()
  data_files.read_data_files('leaf', data_dir=data_dir, cache_dir=cache_dir)
  data_step = time.perf_counter() - started
  # Before TensorFlow (whose import runs programs of its own).
  children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KB.
  started = time.perf_counter()
  from tff_fedwin.tasks import leaf as leaf_task_lib

  imported = time.perf_counter()
  task = leaf_task_lib.leaf_task(
      data_dir,
      batch_size=20,
      epochs=1,
      seed=0,
      cache_dir=data_files.leaf_cache_dir(cache_dir),
  )
  client = task.train_data.client_ids[0]
  next(iter(task.train_data.create_tf_dataset_for_client(client)))
  next(iter(task.test_data))
  done = time.perf_counter()
  with open('/proc/self/status') as f:
    peak = next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))
  return {
      'import_seconds': imported - started,
      'start_seconds': data_step + done - imported,
      'peak_rss_mb': peak / 2**10,
      'children_peak_rss_mb': children / 2**10,
      'num_clients': len(task.train_data.client_ids),
  }


def _imports_only() -> dict[str, Any]:
  started = time.perf_counter()
  # pylint: disable=g-import-not-at-top,unused-import
  from tff_fedwin.tasks import leaf as leaf_task_lib  # noqa: F401

  with open('/proc/self/status') as f:
    peak = next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))
  return {
      'import_seconds': time.perf_counter() - started,
      'start_seconds': 0.0,
      'peak_rss_mb': peak / 2**10,
      'children_peak_rss_mb': 0.0,
      'num_clients': 0,
  }


def measure_start(
    data_dir: Optional[str], cache_dir: Optional[str]
) -> dict[str, Any]:
  """One start in a fresh Python process; `data_dir=None`: the imports only.

  Returns:
    `{'import_seconds', 'start_seconds', 'peak_rss_mb',
    'children_peak_rss_mb', 'num_clients', 'wall_seconds'}`: the child's
    import time, its data step (before TensorFlow) plus `leaf_task` plus one
    client dataset and one test batch read, its peak RSS (VmHWM, MB), the
    largest peak RSS of its conversion processes, its clients, and the
    child's whole wall time.

  Raises:
    RuntimeError: If the child fails (its stderr's end in the message).
  """
  if data_dir is None:
    return run_in_child(__name__, '_imports_only', [])
  return run_in_child(__name__, '_start', [data_dir, cache_dir])


def run_in_child(module: str, function: str, args: list[Any]) -> dict[str, Any]:
  """`module.function(*args)` in a fresh Python process: its JSON result.

  Adds `wall_seconds`, the child's whole wall time.

  Raises:
    RuntimeError: If the child fails (its stderr's end in the message).
  """
  # The checkout's root first on the child's path, as in the parent:
  # `benchmarks` is not installed with the package.
  code = (
      'import importlib, json, sys\n'
      'sys.path.insert(0, sys.argv[4])\n'
      'f = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])\n'
      'print("RESULT " + json.dumps(f(*json.loads(sys.argv[3]))))\n'
  )
  started = time.perf_counter()
  result = subprocess.run(
      [sys.executable, '-c', code, module, function, json.dumps(args), _ROOT],
      capture_output=True,
      text=True,
      check=False,
  )
  wall = time.perf_counter() - started
  lines = [l for l in result.stdout.splitlines() if l.startswith('RESULT ')]
  if result.returncode or not lines:
    raise RuntimeError(f'The child process failed: {result.stderr[-2000:]}')
  return {**json.loads(lines[-1][len('RESULT ') :]), 'wall_seconds': wall}
