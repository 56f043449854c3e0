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
import tempfile
from collections.abc import Callable, Sequence
from typing import Optional

import tensorflow_federated as tff

from tff_fedwin.algorithms import scaffold
from tff_fedwin.benchmarks import scale
from tff_fedwin.training import client_states as client_states_lib

_DRIVER_PATH_ROUNDS = 200


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
) -> list[scale.RowSpec]:
  """Large-population rows first (their driver peak is not inflated by the
  in-memory rows), then the in-memory rows; `rounds=0`: rounds for
  `coverage` of the large population at each clients-per-round."""
  large, small = [], []
  for variant in variants:
    for k in clients_per_round:
      r = rounds or scale.rounds_for_coverage(num_clients, k, coverage)
      for rows, store, n in (
          (large, large_client_states, num_clients),
          (small, 'memory', memory_num_clients),
      ):
        rows.append(
            scale.RowSpec(
                _row_name(variant, store, n, k), variant, n, k, store, r
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


def _fit_line(result: scale.RowResult) -> str:
  """Interval bytes fitted against updated clients, in client states."""
  points = result.checkpoints
  if len({c.updated_clients for c in points}) < 2:
    return f'{result.spec.name}: too few distinct checkpoint sizes to fit.'
  slope, intercept = scale.linear_fit(
      [c.updated_clients for c in points], [c.interval_bytes for c in points]
  )
  return (
      f'{result.spec.name}: interval bytes = {slope / 2**20:.2f} MB x updated '
      f'clients + {intercept / 2**20:.1f} MB (one client state: '
      f'{result.state_mb:.2f} MB, slope / state = '
      f'{slope / (result.state_mb * 2**20):.2f}).'
  )


def scale_table(results: Sequence[scale.RowResult], header: str) -> str:
  """Rows, ratios to the in-memory row of the same variant and k, checkpoints."""
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
  return scale_table(
      results,
      f'Scale: synthetic EMNIST-shaped clients ({examples_per_client} '
      f'examples, batch {batch_size}), checkpoint every '
      f'{rounds_per_checkpoint} rounds; s/round = median round_time_seconds '
      f'after {warmup_rounds} warm-up rounds; each row on a fresh worker, '
      f'in {output_dir}.',
  )


def _driver_path_ms(task, k: int, kind: str) -> float:
  """The driver's round work on `task`'s population served by `kind`.

  `kind` 'ours' uses the `SyntheticPopulation` itself, 'tff' the same
  clients as TFF's `ClientData.from_clients_and_tf_fn`.
  """
  data = task.train_data
  if kind == 'tff':
    data = tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
        data.client_ids, data.serializable_dataset_fn
    )
  store = client_states_lib.ClientStateStore(
      scaffold.initial_client_state(task.model_fn)
  )
  seconds = scale.driver_path_seconds(
      data,
      clients_per_round=k,
      rounds=_DRIVER_PATH_ROUNDS,
      preprocess_fn=task.preprocess_fn,
      store=store,
  )
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
    client_states: str = 'memory',
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
  lines = [
      f'Population: SCAFFOLD, small CNN (62 classes), {clients_per_round} '
      f'clients per round, {rounds} rounds ({client_states} store); driver '
      f'path = median over {_DRIVER_PATH_ROUNDS} rounds of sampling + '
      'datasets + store get/update, no TFF call, with our SyntheticPopulation'
      " and with TFF's ConcreteClientData (its `create_tf_dataset_for_client`"
      ' checks `client_id in client_ids`, a list scan).',
      '',
      '| clients | s/round (loop) | driver path ms | driver path ms, TFF '
      'ClientData |',
      '|---:|---:|---:|---:|',
  ]
  for r in results:
    task = scale.build_task(
        r.spec,
        examples_per_client=examples_per_client,
        batch_size=batch_size,
        seed=0,
    )
    ours, theirs = (
        _driver_path_ms(task, clients_per_round, kind)
        for kind in ('ours', 'tff')
    )
    for key, value in zip(
        ('loop', 'ours', 'tff'), (r.seconds_per_round, ours, theirs)
    ):
      columns[key].append(value)
    lines.append(
        f'| {r.spec.num_clients} | {r.seconds_per_round:.3f} | {ours:.2f} | '
        f'{theirs:.2f} |'
    )
  ratios = {k: max(v) / min(v) for k, v in columns.items()}
  lines.append(
      f'| max/min | {ratios["loop"]:.3f} | {ratios["ours"]:.2f} | '
      f'{ratios["tff"]:.2f} |'
  )
  return '\n'.join(lines)
