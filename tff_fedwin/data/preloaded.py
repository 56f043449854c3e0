"""Data files read once, before TensorFlow is imported, and handed over.

A script checks its data files before it imports TensorFlow, so that a
missing or malformed file is refused in about a second
(`tff_fedwin.experiments.data_files`). The check is the loader itself
(`sources.load_npz`, `leaf_cache.load_leaf_cache`,
`text_records.load_text_splits`), run early through `load`; the task
builders later call the same loader with the same arguments through `take`,
which hands over that result instead of reading the files a second time.

`take` without an earlier `load` just calls the loader, so library callers
that never preload see no difference. A handed-over result is removed from
the stash: each `load` serves one `take`, and nothing stays in memory past
it.
"""

from collections.abc import Callable, Hashable
from typing import Any

_STASH: dict[Hashable, Any] = {}


def _key(loader: Callable[..., Any], args, kwargs) -> Hashable:
  return (loader, tuple(args), tuple(sorted(kwargs.items())))


def load(loader: Callable[..., Any], *args, **kwargs) -> Any:
  """Returns `loader(*args, **kwargs)`, kept for one later `take`.

  Args:
    loader: A function that reads data files (it raises on bad ones).
    *args: Its positional arguments (hashable).
    **kwargs: Its keyword arguments (hashable).

  Returns:
    The loader's result.
  """
  result = loader(*args, **kwargs)
  _STASH[_key(loader, args, kwargs)] = result
  return result


def take(loader: Callable[..., Any], *args, **kwargs) -> Any:
  """The result of an earlier `load` with these arguments, or a fresh call.

  Args:
    loader: As for `load`.
    *args: As for `load`; they must be equal to match.
    **kwargs: As for `load`.

  Returns:
    `loader(*args, **kwargs)`'s result.
  """
  key = _key(loader, args, kwargs)
  if key in _STASH:
    return _STASH.pop(key)
  return loader(*args, **kwargs)
