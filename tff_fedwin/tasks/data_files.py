"""A task's data files, read and checked before TensorFlow is imported.

`read_data_files` runs the loader of task `npz`, `leaf` or `text` with the
arguments `registry.create_task` gives it later, through
`tff_fedwin.data.preloaded`: a missing or malformed file (npz arrays, LEAF
layout, JSONL / CSV fields) raises its one-line error in about a second, and
`create_task` takes the result over instead of reading the files again.
Plain Python and numpy only.
"""

import os
from typing import Optional

from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import preloaded
from tff_fedwin.data import sources
from tff_fedwin.data import text_records

LeafOptions = leaf_kinds.LeafOptions


def leaf_cache_dir(cache_dir: Optional[str]) -> Optional[str]:
  """Where task `leaf` keeps its conversion, given `--cache_dir`."""
  return os.path.join(cache_dir, 'leaf') if cache_dir else None


def read_data_files(
    name: str,
    *,
    data_npz: Optional[str] = None,
    scale_integer_features: bool = True,
    max_npz_bytes: int = 0,
    data_dir: Optional[str] = None,
    leaf_kind: str = 'auto',
    leaf_options: leaf_kinds.LeafOptions = leaf_kinds.LeafOptions(),
    cache_dir: Optional[str] = None,
    data_jsonl: Optional[str] = None,
    test_fraction: float = 0.2,
) -> Optional[int]:
  """Reads task `name`'s data files (if it has any) for `create_task`.

  Arguments as `registry.create_task`'s; a task without a file of its own
  (`mnist`, `emnist`, ...) or without its path (`create_task` names the
  missing flag) reads nothing.

  Returns:
    The number of training clients the files hold (LEAF users, text
    clients), or None where the flags decide it (npz) or nothing was read.

  Raises:
    ValueError: The loader's one-line error (`sources.load_npz`,
      `leaf.LeafDataError`, `text_records.TextDataError`).
  """
  if name == 'npz' and data_npz:
    preloaded.load(
        sources.load_npz,
        data_npz,
        scale_integer_features=scale_integer_features,
        max_bytes=max_npz_bytes,
    )
  elif name == 'leaf' and data_dir:
    cache = preloaded.load(
        leaf_cache.load_leaf_cache,
        data_dir,
        leaf_kind,
        leaf_cache_dir(cache_dir),
        leaf_options,
    )
    return len(cache.client_ids)
  elif name == 'text' and data_jsonl:
    splits = preloaded.load(
        text_records.load_text_splits, data_jsonl, test_fraction
    )
    return len(splits.client_ids)
  return None
