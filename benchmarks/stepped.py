"""A benchmark row as prepared rounds that can be stepped one at a time.

A `RoundsFn` prepares a row on the clients' data (builds the process or the
bound, runs the untimed warm-up round) and returns `Rounds`, whose `next()`
runs one more round. `SteppedRow` times such a row as a `rounds.RowFn`;
`benchmarks.paired` alternates the rounds of a row and of its own bound, so
that both see the same moments of this shared machine.
"""

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_data_bundle


class Rounds(NamedTuple):
  """A prepared row (its warm-up round done).

  Attributes:
    next: `() -> None`, runs one round.
    state_mb: `() -> float`, the size of what the row keeps between rounds.
    close: `() -> None`, frees what the row holds outside Python (files).
  """

  next: Callable[[], None]
  state_mb: Callable[[], float]
  close: Callable[[], None] = lambda: None


# (the clients' datasets) -> Rounds.
RoundsFn = Callable[[Any], Rounds]


class SteppedRow(NamedTuple):
  """A `rounds.RowFn` of a `RoundsFn`: `(data, num_rounds) -> (s, MB)`.

  Prepares the rounds (warm-up included), times `num_rounds` calls of
  `next` and closes them. `rounds` stays reachable for `benchmarks.paired`.
  """

  rounds: RoundsFn

  def __call__(self, data: Any, num_rounds: int) -> tuple[float, float]:
    prepared = self.rounds(data)
    try:
      seconds = sum(time_round(prepared) for _ in range(num_rounds))
      return seconds / num_rounds, prepared.state_mb()
    finally:
      prepared.close()


def time_round(rounds: Rounds) -> float:
  """Seconds taken by one `rounds.next()`."""
  start = time.perf_counter()
  rounds.next()
  return time.perf_counter() - start


def temporary_directory(wanted: bool, prefix: str) -> Optional[str]:
  """A new temporary directory if `wanted`, else None."""
  return tempfile.mkdtemp(prefix=prefix) if wanted else None


def client_data_by_id(
    data: Sequence[tf.data.Dataset], wanted: bool
) -> tuple[Any, Optional[tff.Computation], Optional[str]]:
  """`(what run_round takes, dataset computation, directory)` for a row.

  Without `wanted`: `(data, None, None)`, the datasets sent as TFF values.
  With it, the clients' examples are written once as a tensor bundle in a
  new temporary directory (`client_data_bundle`) and the row's runner gets
  the clients' ids and the bundle's `dataset_computation`, which batches the
  examples as `data` holds them (every batch the size of `data[0]`'s
  first).
  """
  if not wanted:
    return data, None, None
  directory = tempfile.mkdtemp(prefix='client_data_')
  ids = [str(k) for k in range(len(data))]
  bundle = client_data_bundle.write_client_data_bundle(
      tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
          ids, lambda client_id: data[int(client_id)].unbatch()
      ),
      os.path.join(directory, 'clients'),
  )
  batch_size = int(tf.nest.flatten(next(iter(data[0])))[0].shape[0])
  preprocessed = bundle.preprocess(lambda d: d.batch(batch_size))
  return ids, preprocessed.dataset_computation, directory


def warmed_up(
    next_round: Callable[[], None],
    state_mb: Callable[[], float],
    *directories: Optional[str],
) -> Rounds:
  """`Rounds` after one untimed `next_round` (tracing).

  `close` removes `directories` (None entries skipped), as does a failed
  warm-up before it raises.
  """

  def close():
    for directory in directories:
      if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)

  try:
    next_round()
  except BaseException:
    close()
    raise
  return Rounds(next_round, state_mb, close)
