"""The scale benchmark's two parts and their markdown tables.

`run_scale_benchmark` (issue 15 item 3): each variant x clients per round on
the large population with the disk store, then on a population that fits in
RAM with the in-memory store; rows, the ratio of round times, and every
checkpoint's bytes against the clients updated since the previous one.
`run_population_benchmark` (item 5): the same small-model round on several
population sizes, through the loop and as the driver's work alone.
"""

import collections
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import scale
from tff_fedwin.algorithms import scaffold
from tff_fedwin.training import client_state_stores
from tff_fedwin.training import sampling

_DRIVER_PATH_ROUNDS = 200
_STORE_WORK_ROUNDS = 40  # Per scale row: up to 40 x k client states written.
_DRIVER_PATH_CHECKPOINT = 10  # Rounds; the disk store's, as in the loop.


def _row_name(variant: str, store: str, num_clients: int, k: int) -> str:
  return f'{variant}_{store}_{num_clients}x{k}'


def scale_specs(
    *,
    variants: Sequence[str],
    clients_per_round: Sequence[int],
    num_clients: int,
    memory_num_clients: int,
    rounds: int,
    coverage: float,
    large_client_states: str = 'disk',
    memory_rounds: int = 0,
) -> list[scale.RowSpec]:
  """The rows of the scale part, large-population rows first.

  The large rows run first, so that the in-memory rows' states do not inflate
  their driver peak. `rounds=0`: enough rounds for `coverage` of the large
  population at each clients per round; `memory_rounds=0`: the in-memory
  rows run as many rounds as the large ones.
  """
  large, small = [], []
  for variant in variants:
    for k in clients_per_round:
      r = rounds or scale.rounds_for_coverage(num_clients, k, coverage)
      for rows, store, n, row_rounds in (
          (large, large_client_states, num_clients, r),
          (small, 'memory', memory_num_clients, memory_rounds or r),
      ):
        rows.append(
            scale.RowSpec(
                _row_name(variant, store, n, k),
                variant,
                n,
                k,
                store,
                row_rounds,
            )
        )
  return large + small


def _checkpoint_lines(result: scale.RowResult) -> list[str]:
  lines = []
  state_bytes = result.state_mb * 2**20
  for c in result.checkpoints:
    expected = c.updated_clients * state_bytes
    ratio = f'{c.interval_bytes / expected:.2f}' if expected else '-'
    lines.append(
        f'| {result.spec.name} | {c.round_num} | {c.updated_clients} | '
        f'{c.clients_with_state} | {c.call_bytes / 2**20:.1f} | '
        f'{c.interval_bytes / 2**20:.1f} | {ratio} | {c.seconds:.2f} |'
    )
  return lines


def linear_fit(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
  """Least-squares `(slope, intercept)` of y = slope * x + intercept."""
  slope, intercept = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
  return float(slope), float(intercept)


def _fit_line(result: scale.RowResult) -> str:
  """Interval bytes fitted against the clients a checkpoint should write.

  A disk store should write the clients updated since the previous
  checkpoint, an in-memory store writes every client with a state.
  """
  points = result.checkpoints
  field = (
      'clients_with_state'
      if result.spec.client_states == 'memory'
      else 'updated_clients'
  )
  x = [getattr(c, field) for c in points]
  if len(set(x)) < 2:
    return f'{result.spec.name}: too few distinct checkpoint sizes to fit.'
  slope, intercept = linear_fit(x, [c.interval_bytes for c in points])
  return (
      f'{result.spec.name}: interval bytes = {slope / 2**20:.2f} MB x '
      f'{field.replace("_", " ")} + {intercept / 2**20:.1f} MB (one client '
      f'state: {result.state_mb:.2f} MB, slope / state = '
      f'{slope / (result.state_mb * 2**20):.2f}).'
  )


def scale_table(results: Sequence[scale.RowResult], header: str) -> str:
  """Rows, ratios to the in-memory row of the same variant and k, checkpoints."""
  # The in-memory rows come last (`scale_specs`): the last one of each
  # variant and clients per round is the reference.
  memory = {
      (r.spec.variant, r.spec.clients_per_round): r.seconds_per_round
      for r in results
      if r.spec.client_states == 'memory'
  }
  lines = [
      header,
      '',
      '| row | store | clients | per round | rounds | s/round | x memory | '
      'driver peak GB | driver anon / file GB | worker peak GB | '
      'median ckpt s | loop other s | wall s |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for r in results:
    s = r.spec
    base = memory.get((s.variant, s.clients_per_round))
    ratio = f'{r.seconds_per_round / base:.3f}' if base else '-'
    ckpt = sorted(c.seconds for c in r.checkpoints)
    lines.append(
        f'| {s.name} | {s.client_states} | {s.num_clients} | '
        f'{s.clients_per_round} | {s.rounds} | {r.seconds_per_round:.3f} | '
        f'{ratio} | {r.driver_peak_gb:.2f} | {r.driver_anon_peak_gb:.2f} / '
        f'{r.driver_file_peak_gb:.2f} | {r.worker_peak_gb:.2f} | '
        f'{ckpt[len(ckpt) // 2] if ckpt else 0:.2f} | '
        f'{r.loop_other_seconds:.1f} | {r.wall_seconds:.0f} |'
    )
  lines += [
      '',
      'Checkpoints: MB written during the save call and over the interval '
      '(rounds since the previous checkpoint + the save), against the '
      'distinct clients updated in the interval; ratio = interval bytes / '
      '(updated clients x one client state).',
      '',
      '| row | round | updated clients | clients with a state | call MB | '
      'interval MB | ratio | s |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for r in results:
    lines += _checkpoint_lines(r)
  lines += [''] + [_fit_line(r) for r in results]
  return '\n'.join(lines)


def store_work_table(
    results: Sequence[scale.RowResult], driver_ms: Sequence[float]
) -> str:
  """Each row's driver round work (`driver_ms`) and its share of s/round.

  The in-memory rows' share is the floor (sampling, a dict lookup); a disk
  row's share above it is what the disk store adds.
  """
  lines = [
      "Store work: the driver's round work without TFF (sampling, store get "
      '+ update; the workers build the datasets by id, as in the rows) with '
      "each row's model, population and store, "
      f'median over {_STORE_WORK_ROUNDS} rounds (the disk store '
      f'checkpointed, untimed, every {_DRIVER_PATH_CHECKPOINT}), and its '
      "share of the row's s/round.",
      '',
      '| row | store | driver ms | share of round |',
      '|---|---|---:|---:|',
  ]
  for r, ms in zip(results, driver_ms, strict=True):
    lines.append(
        f'| {r.spec.name} | {r.spec.client_states} | {ms:.1f} | '
        f'{ms / 1e3 / r.seconds_per_round:.1%} |'
    )
  return '\n'.join(lines)


def _store_work_ms(
    result: scale.RowResult, *, examples_per_client: int, batch_size: int
) -> float:
  task = scale.build_task(
      result.spec,
      examples_per_client=examples_per_client,
      batch_size=batch_size,
      seed=0,
  )
  return _driver_path_ms(
      task,
      result.spec.clients_per_round,
      'ours',
      result.spec.client_states,
      rounds=_STORE_WORK_ROUNDS,
      # The rows' workers build the datasets by id (a SyntheticPopulation).
      build_datasets=False,
  )


def run_scale_benchmark(
    specs: Sequence[scale.RowSpec],
    *,
    examples_per_client: int,
    batch_size: int,
    rounds_per_checkpoint: int,
    warmup_rounds: int,
    output_dir: Optional[str],
    keep_outputs: bool = False,
    log: Callable[[str], None] = print,
) -> str:
  """Runs `specs` (`scale_specs`); returns the markdown of `scale_table`."""
  output_dir = output_dir or tempfile.mkdtemp(prefix='benchmark_scale_')
  os.makedirs(output_dir, exist_ok=True)
  results = scale.run_rows(
      specs,
      log=log,
      examples_per_client=examples_per_client,
      batch_size=batch_size,
      rounds_per_checkpoint=rounds_per_checkpoint,
      warmup_rounds=warmup_rounds,
      output_dir=output_dir,
      keep_outputs=keep_outputs,
  )
  table = scale_table(
      results,
      f'Scale: synthetic EMNIST-shaped clients ({examples_per_client} '
      f'examples, batch {batch_size}), checkpoint every '
      f'{rounds_per_checkpoint} rounds; s/round = median round_time_seconds '
      f'after {warmup_rounds} warm-up rounds; each row on a fresh worker, '
      f'in {output_dir}.',
  )
  driver_ms = [
      _store_work_ms(
          r, examples_per_client=examples_per_client, batch_size=batch_size
      )
      for r in results
  ]
  return table + '\n\n' + store_work_table(results, driver_ms)


def driver_path_seconds(
    client_data: Any,
    *,
    clients_per_round: int,
    rounds: int,
    preprocess_fn: Callable[[tf.data.Dataset], tf.data.Dataset],
    store: Any,
    rounds_per_checkpoint: Optional[int] = None,
    seed: int = 0,
    build_datasets: bool = True,
) -> float:
  """Median driver time of a round's sampling, datasets and state lookup.

  What `run_training` does in the driver around `run_round` (the loop's
  `sample_clients`, `client_datasets` if `build_datasets`, `store.get` and
  `store.update`), with no TFF call, for rounds 1..`rounds`. Without
  `build_datasets` the round is the loop's with the clients' data by id
  (a runner that `takes_client_ids`, the default with local workers): the
  workers build the datasets. With `rounds_per_checkpoint`, the
  store's checkpoint steps run (untimed) every that many rounds, as in the
  loop (a disk store's pending updates then stay one interval's).
  """
  client_ids = list(client_data.client_ids)
  times = []
  for t in range(1, rounds + 1):
    start = time.perf_counter()
    sampled = sampling.sample_clients(client_ids, clients_per_round, seed, t)
    if build_datasets:
      sampling.client_datasets(client_data, sampled, preprocess_fn)
    store.update(sampled, store.get(sampled))
    times.append(time.perf_counter() - start)
    if rounds_per_checkpoint and t % rounds_per_checkpoint == 0:
      store.prepare_checkpoint(t)
      store.finish_checkpoint(t, ())
  return statistics.median(times)


def _driver_path_ms(
    task,
    k: int,
    data_kind: str,
    store_kind: str,
    rounds: int = _DRIVER_PATH_ROUNDS,
    build_datasets: bool = True,
) -> float:
  """The driver's round work on `task`'s population, in ms.

  `data_kind` 'ours' serves the clients from the `SyntheticPopulation`
  itself, 'tff' through TFF's `ClientData.from_clients_and_tf_fn`;
  `store_kind` is the client-state store ('memory' or 'disk', in a temporary
  directory); `build_datasets` as for `driver_path_seconds`.
  """
  data = task.train_data
  if data_kind == 'tff':
    data = tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
        data.client_ids, data.serializable_dataset_fn
    )
  with tempfile.TemporaryDirectory(prefix='benchmark_scale_') as directory:
    store = client_state_stores.open_client_states(
        store_kind,
        scaffold.initial_client_state(task.model_fn),
        data.client_ids,
        checkpoint_dir=directory,
    )
    try:
      seconds = driver_path_seconds(
          data,
          clients_per_round=k,
          rounds=rounds,
          preprocess_fn=task.preprocess_fn,
          store=store,
          rounds_per_checkpoint=(
              _DRIVER_PATH_CHECKPOINT if store_kind == 'disk' else None
          ),
          build_datasets=build_datasets,
      )
    finally:
      store.close()
  return seconds * 1e3


def run_population_benchmark(
    populations: Sequence[int],
    *,
    clients_per_round: int,
    rounds: int,
    examples_per_client: int,
    batch_size: int,
    warmup_rounds: int,
    output_dir: Optional[str],
    client_states: str = 'disk',
    log: Callable[[str], None] = print,
) -> str:
  """Item 5: the small-model SCAFFOLD round on each population size."""
  output_dir = output_dir or tempfile.mkdtemp(prefix='benchmark_scale_')
  specs = [
      scale.RowSpec(
          f'population_{n}x{clients_per_round}',
          'scaffold',
          n,
          clients_per_round,
          client_states,
          rounds,
          'small',
      )
      for n in populations
  ]
  results = scale.run_rows(
      specs,
      log=log,
      examples_per_client=examples_per_client,
      batch_size=batch_size,
      rounds_per_checkpoint=max(1, rounds // 2),
      warmup_rounds=warmup_rounds,
      output_dir=output_dir,
  )
  columns = collections.defaultdict(list)
  kinds = (('ours', 'memory'), ('ours', 'disk'), ('tff', 'memory'))
  lines = [
      f'Population: SCAFFOLD, small CNN (62 classes), {clients_per_round} '
      f'clients per round, {rounds} rounds, {client_states} store. Driver '
      f"path: median over {_DRIVER_PATH_ROUNDS} rounds of the driver's "
      'round work without TFF (sampling, datasets built in the driver as '
      'with --client_data_transfer=values, store get + update), '
      "with our SyntheticPopulation or TFF's ConcreteClientData (whose "
      '`create_tf_dataset_for_client` checks `client_id in client_ids`, a '
      'list scan), and the memory or disk store (the disk store checkpointed, '
      f'untimed, every {_DRIVER_PATH_CHECKPOINT} rounds as in the loop).',
      '',
      '| clients | s/round (loop) | driver ms, memory | driver ms, disk | '
      'driver ms, TFF ClientData + memory |',
      '|---:|---:|---:|---:|---:|',
  ]
  for r in results:
    task = scale.build_task(
        r.spec,
        examples_per_client=examples_per_client,
        batch_size=batch_size,
        seed=0,
    )
    values = [r.seconds_per_round] + [
        _driver_path_ms(task, clients_per_round, data_kind, store_kind)
        for data_kind, store_kind in kinds
    ]
    for column, value in enumerate(values):
      columns[column].append(value)
    lines.append(
        f'| {r.spec.num_clients} | {values[0]:.3f} | '
        + ' | '.join(f'{v:.2f}' for v in values[1:])
        + ' |'
    )
  ratios = [max(columns[c]) / min(columns[c]) for c in sorted(columns)]
  lines.append('| max/min | ' + ' | '.join(f'{x:.3f}' for x in ratios) + ' |')
  return '\n'.join(lines)
