"""Each experiment's paired differences and verdicts from its runs-CSV lines.

`verdict_table` reads the lines `experiment_rows.run_record` writes (one per
run: experiment, row, seed, the window's and the global model's last-N
accuracy) and tabulates, by the rule of `tff_fedwin.reporting.paired`:

- per row whose window differs from its global model in some seed
  (evaluate mode), window - global, paired by seed (the same trajectory);
- per pair of rows in `ROW_COMPARISONS`, row A - row B of the global
  model's accuracy, paired by seed (in broadcast mode, IMA's rows, the
  window is the global model);
- per pair in `MODEL_COMPARISONS`, a named model ('window' or 'global') of
  row A minus one of row B, paired by seed (WiMA Fig. 2: SWA's model, the
  `window` column of an SWA run, against WiMA's window and FedAvg's global
  model).

RESULTS.md quotes these verdicts.
"""

from collections.abc import Iterable, Mapping, Sequence

from tff_fedwin.reporting import paired

# The cross-row claims RESULTS.md judges: {experiment: ((row A, row B), ...)},
# A - B of the global model's last-N accuracy per seed.
_IMA_FEDAVG = 'fedavg alpha=0.1 IMA'
_IMA_BASE = 'fedavg alpha=0.1 no window'
_IMA_SCHEDULE = 'fedavg alpha=0.1 IMA schedule only W=1'
_IMA_ADAM = ('fedadam alpha=0.1 IMA', 'fedadam alpha=0.1 no window')
_WSM_FEDAVG = 'fedavg alpha=0.1 wsm lr=0.2 W=10'
_WSM_SCAFFOLD = 'scaffold alpha=0.1 wsm lr=0.1 W=10'
_CE_SCAFFOLD = 'scaffold alpha=0.1 ce lr=0.05 W=10'
_IMA_ROWS = (
    (_IMA_FEDAVG, _IMA_BASE),
    (_IMA_FEDAVG, _IMA_SCHEDULE),
    (_IMA_SCHEDULE, _IMA_BASE),
    _IMA_ADAM,
)
# IMA Table 1's shape: IMA minus no IMA per algorithm (`experiments.paper_tables.
# IMA_TABLE_ALGORITHMS`; tests/experiments/papers_test.py keeps them equal).
IMA_TABLE_PAIRS = tuple(
    (f'{alg} alpha=0.1 IMA', f'{alg} alpha=0.1 no window')
    for alg in (
        'fedavg',
        'fedprox',
        'fedasam',
        'fednova',
        'fedgma',
        'fedfa',
        'fedadam',
        'fedyogi',
    )
)
# FedYogi's IMA split into the window's and the schedule's share.
_YOGI_SCHEDULE = 'fedyogi alpha=0.1 IMA schedule only W=1'
IMA_YOGI_SPLIT = (
    ('fedyogi alpha=0.1 IMA', _YOGI_SCHEDULE),
    (_YOGI_SCHEDULE, 'fedyogi alpha=0.1 no window'),
)
# IMA Table 3's shape (`experiments.paper_tables.ima_decays`): IMA's
# exponential client decay minus each other scheme, and minus no IMA.
IMA_DECAY_PAIRS = tuple(
    (_IMA_FEDAVG, f'fedavg alpha=0.1 {other}')
    for other in ('IMA const lr', 'IMA cyclic c=5', 'IMA NA decay', 'no window')
)
# The epoch decay (`paper_tables.ima_epoch_decay`): against IMA and
# against the same without it (NA decay).
_EPOCH_DECAY = 'fedavg alpha=0.1 IMA epoch decay P=15'
IMA_EPOCH_DECAY_PAIRS = (
    (_IMA_FEDAVG, _EPOCH_DECAY),
    (_EPOCH_DECAY, 'fedavg alpha=0.1 IMA NA decay'),
    (_IMA_FEDAVG, 'fedavg alpha=0.1 no window'),
)
ROW_COMPARISONS = {
    'ima_algorithms': IMA_TABLE_PAIRS + IMA_YOGI_SPLIT,
    'ima_decays': IMA_DECAY_PAIRS,
    'ima_epoch_decay': IMA_EPOCH_DECAY_PAIRS,
    'ima': _IMA_ROWS,
    'ima_local_setup': _IMA_ROWS,
    'ima_early_start': ((_IMA_FEDAVG, _IMA_BASE), _IMA_ADAM),
    'wsm': (
        (_WSM_FEDAVG, 'fedavg alpha=0.1 ce lr=0.2 W=10'),
        (_WSM_FEDAVG, _CE_SCAFFOLD),
        (_WSM_FEDAVG, _WSM_SCAFFOLD),
        (_WSM_SCAFFOLD, _CE_SCAFFOLD),
    ),
}

# WiMA Fig. 2's shape (`experiments.paper_tables.swa_start_rows`; tests/experiments/
# papers_test.py keeps them equal): per start round t_s, SWA's model minus
# WiMA's window, then minus FedAvg's global model (the WiMA run's).
SWA_TABLE_PAIRS = tuple(
    (
        f'fedavg alpha=0.05 SWA t_s={start} c=5',
        'window',
        f'fedavg alpha=0.05 WiMA W=10 t_s={start}',
        model,
    )
    for start in (10, 20, 30)
    for model in ('window', 'global')
)
# WiMA Table 5's shape (`experiments.paper_tables.wima_window_part`):
# per alpha, the window over the feature extractor only minus the one over
# the classifier only, then minus the whole model's.
WINDOW_PART_PAIRS = tuple(
    (f'fedavg alpha={alpha} W=10 features only', 'window', other, 'window')
    for alpha in (0.0, 0.05)
    for other in (
        f'fedavg alpha={alpha} W=10 classifier only',
        f'fedavg alpha={alpha} W=10',
    )
)
# Claims on named models: {experiment: ((row A, model A, row B, model B),
# ...)}, A's model - B's model of the last-N accuracy per seed.
MODEL_COMPARISONS = {
    'wima_swa_start': SWA_TABLE_PAIRS,
    'wima_window_part': WINDOW_PART_PAIRS,
}

WINDOW_MINUS_GLOBAL = 'window - global'
ROW_MINUS_ROW = 'row A - row B (global)'
MODEL_MINUS_MODEL = 'row A (model) - row B (model)'
_MODEL_INDEX = {'window': 0, 'global': 1}


def _accuracies(records, experiment):
  """{row: {seed: (window, global)}} of the experiment's lines."""
  rows = {}
  for r in records:
    if r['experiment'] == experiment:
      rows.setdefault(r['row'], {})[str(r['seed'])] = (
          float(r['window_accuracy']),
          float(r['global_accuracy']),
      )
  return rows


def comparisons(
    records: Iterable[Mapping[str, object]],
    experiment: str,
    row_comparisons: Mapping[str, Sequence[tuple[str, str]]] = (
        ROW_COMPARISONS
    ),
    model_comparisons: Mapping[str, Sequence[tuple[str, str, str, str]]] = (
        MODEL_COMPARISONS
    ),
) -> list[tuple[str, str, dict[str, float]]]:
  """(kind, rows, {seed: difference}) of the experiment's paired claims.

  Args:
    records: Runs-CSV lines (dicts; values may be strings).
    experiment: Whose lines to read.
    row_comparisons: {experiment: ((row A, row B), ...)}; a pair is paired
      over the seeds both rows have.
    model_comparisons: {experiment: ((row A, model A, row B, model B), ...)}
      with models 'window' or 'global'; paired as `row_comparisons`.

  Raises:
    ValueError: A compared row has no line, or two rows share no seed.
  """
  rows = _accuracies(records, experiment)
  found = []
  for row, seeds in rows.items():
    if any(w != g for w, g in seeds.values()):
      found.append(
          (WINDOW_MINUS_GLOBAL, row, {s: w - g for s, (w, g) in seeds.items()})
      )

  def paired_seeds(a, b):
    missing = [r for r in (a, b) if r not in rows]
    if missing:
      raise ValueError(f'{experiment}: no runs-CSV line of rows {missing}.')
    seeds = [s for s in rows[a] if s in rows[b]]
    if not seeds:
      raise ValueError(f'{experiment}: rows {a!r} and {b!r} share no seed.')
    return seeds

  for a, b in row_comparisons.get(experiment, ()):
    found.append(
        (
            ROW_MINUS_ROW,
            f'{a} - {b}',
            {s: rows[a][s][1] - rows[b][s][1] for s in paired_seeds(a, b)},
        )
    )
  for a, model_a, b, model_b in model_comparisons.get(experiment, ()):
    i, j = _MODEL_INDEX[model_a], _MODEL_INDEX[model_b]
    found.append(
        (
            MODEL_MINUS_MODEL,
            f'{a} ({model_a}) - {b} ({model_b})',
            {s: rows[a][s][i] - rows[b][s][j] for s in paired_seeds(a, b)},
        )
    )
  return found


def verdict_table(
    records: Iterable[Mapping[str, object]],
    experiment: str,
    row_comparisons: Mapping[str, Sequence[tuple[str, str]]] = (
        ROW_COMPARISONS
    ),
    model_comparisons: Mapping[str, Sequence[tuple[str, str, str, str]]] = (
        MODEL_COMPARISONS
    ),
) -> list[str]:
  """Markdown: the experiment's paired differences with their verdicts.

  Args:
    records: Runs-CSV lines (dicts; values may be strings).
    experiment: Whose lines to read.
    row_comparisons: As in `comparisons`.
    model_comparisons: As in `comparisons`.

  Returns:
    A caption, a table (one line per comparison: seeds, mean, sample std,
    95% t interval, seeds > 0, verdict) and a blank line; no lines if the
    experiment has no paired claim (e.g. no window and no row pairs).
  """
  found = comparisons(
      list(records), experiment, row_comparisons, model_comparisons
  )
  if not found:
    return []
  lines = [
      'Paired differences over seeds (last-N accuracy), by the rule of '
      'RESULTS.md (`reporting.paired`): mean, sample std, 95% t interval; '
      'Yes if the interval is above 0, No if below, within noise otherwise:',
      '',
      '| paired by seed | rows | seeds | mean | sample std | 95% interval | '
      'seeds > 0 | verdict |',
      '|---|---|---:|---:|---:|---:|---:|---|',
  ]
  for kind, rows, by_seed in found:
    d = paired.paired_difference(list(by_seed.values()))
    spread = (
        ('', '')
        if d.std is None
        else (
            f'{d.std:.4f}',
            f'[{d.low:+.4f}, {d.high:+.4f}]',
        )
    )
    lines.append(
        f'| {kind} | {rows} | {d.n} | {d.mean:+.4f} | {spread[0]} | '
        f'{spread[1]} | {d.positive}/{d.n} | {d.verdict} |'
    )
  return lines + ['']
