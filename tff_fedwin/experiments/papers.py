"""The papers' experiments at this machine's scale, as configurations.

`paper_experiments(total_rounds)` is `{experiment: {row label: config}}`:
what scripts/reproduce_papers.py runs for each seed and tabulates (RESULTS.md
quotes the tables). The `tuning` experiment picks hyperparameters where the
papers tune them, on MNIST's validation split, never on the test set
(`eval_split='validation'`): the client learning rate per algorithm and loss
(the WSM paper takes the best per loss) and FedAvgM's server learning rate.
`TUNED` holds the values it picked, which the `wsm` and `mnist_wima` rows
use; `EXPERIMENT_SEEDS` gives the seeds of experiments that do not run every
seed.
"""

from typing import Optional

import attrs

from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import forks
from tff_fedwin.experiments import paper_tables

# Grids of the `tuning` experiment: {group: (flag, values)}; a group's rows
# differ only in that flag.
CLIENT_LR_GRID = (0.02, 0.05, 0.1, 0.2, 0.5)
SERVER_LR_GRID = (0.1, 1.0)
# The values `tuning` picked (best validation accuracy of the global model,
# mean of the last evals, seed 0), per group; results/tables.md, RESULTS.md
# sec. 3 (picked 2026-11-25).
TUNED = {
    'fedavg alpha=0.1 ce': 0.2,
    'fedavg alpha=0.1 wsm': 0.2,
    'scaffold alpha=0.1 ce': 0.05,
    'scaffold alpha=0.1 wsm': 0.1,
    'fedavgm alpha=0.0': 0.1,
    'fedavgm alpha=0.05': 0.1,
}
# Experiments run for these seeds only, whatever --seeds says.
EXPERIMENT_SEEDS = {'tuning': ('0',)}


def tuning_group(label: str) -> tuple[str, float]:
  """A `tuning` row label -> (its `TUNED` key, the value it tries)."""
  group, _, assignment = label.rpartition(' ')
  return group, float(assignment.partition('=')[2])


# 100 clients, 10% participation, label skew (the papers' structure).
BASE = config_lib.ExperimentConfig(
    task='mnist',
    num_clients=100,
    clients_per_round=10,
    client_epochs=1,
    client_batch_size=20,
    client_learning_rate=0.05,
    rounds_per_eval=2,
    rounds_per_checkpoint=10,
    summary_last_n=10,
)


def paper_experiments(
    total_rounds: Optional[int] = None,
) -> dict[str, dict[str, config_lib.ExperimentConfig]]:
  """{experiment: {row label: config}}; `total_rounds` overrides the defaults.

  Rounds are scaled to 2 cores: 40 per run (~1.6 min for MNIST), 120 for the
  window sweep so that W=100 is active over the whole summary span (the
  window model is the global model before round W, docs/design.md sec. 1),
  100 for Shakespeare (~3 s per round, eval every 5 rounds).
  """
  rounds = lambda default: total_rounds or default
  base = attrs.evolve(BASE, total_rounds=rounds(40))
  table = {}
  table['mnist_wima'] = {
      f'{alg} alpha={alpha}{slr_label} W=10': attrs.evolve(
          base,
          algorithm=alg,
          dirichlet_alpha=alpha,
          window_size=10,
          server_learning_rate=slr,
      )
      for alpha in (0.0, 0.05)
      for alg in ('fedavg', 'fedavgm', 'scaffold')
      for slr in [TUNED.get(f'{alg} alpha={alpha}', 1.0)]
      for slr_label in [f' slr={slr}' if alg == 'fedavgm' else '']
  }
  # The four windows of one trajectory in one run per seed (--window_sizes,
  # evaluate mode), 120 rounds.
  table['mnist_window_sweep'] = {
      'fedavg alpha=0.05 W=5,10,50,100': attrs.evolve(
          base,
          dirichlet_alpha=0.05,
          window_size=100,
          window_sizes='5,10,50',
          total_rounds=rounds(120),
      )
  }
  # All five windows of one trajectory in one run per seed (--window_sizes,
  # evaluate mode: training does not depend on W), 500 rounds.
  table['mnist_window_horizon'] = {
      f'fedavg alpha={alpha} W=5,10,50,100,200': attrs.evolve(
          base,
          dirichlet_alpha=alpha,
          window_size=100,
          window_sizes='5,10,50,200',
          total_rounds=rounds(500),
          rounds_per_eval=5,
      )
      for alpha in (0.05, 0.0)
  }
  table['ima'] = _ima_experiment(attrs.evolve(base, total_rounds=rounds(40)))
  # IMA's own local setup (IMA paper, sec. 7.1.3): batch 50, 5 local epochs,
  # client SGD lr 0.01 with momentum 0.9, decayed 0.99 per round in the no-IMA
  # rows (Table 7); R = 300 (paper: 300 for FMNIST), t_s = 0.75 R.
  ima_local = attrs.evolve(
      base,
      total_rounds=rounds(300),
      client_epochs=5,
      client_batch_size=50,
      client_learning_rate=0.01,
      client_momentum=0.9,
      rounds_per_eval=5,
  )
  table['ima_local_setup'] = _ima_experiment(
      ima_local, baseline_schedule='decay'
  )
  # The speed-up claim (IMA paper, Table 2: t_s = 150 of 400 rounds) with
  # the same local setup: FedAvg and FedAdam, IMA from t_s = 0.375 R. Its
  # no-window rows are ima_local_setup's (the same configs).
  table['ima_early_start'] = _ima_experiment(
      ima_local,
      baseline_schedule='decay',
      start_fraction=0.375,
      schedule_only=(),
  )
  table['wsm'] = {
      f'{alg} alpha=0.1 {loss} lr={lr} W=10': attrs.evolve(
          base,
          algorithm=alg,
          dirichlet_alpha=0.1,
          client_loss=loss,
          client_learning_rate=lr,
          window_size=10,
      )
      for alg in ('fedavg', 'scaffold')
      for loss in ('ce', 'wsm')
      for lr in [TUNED[f'{alg} alpha=0.1 {loss}']]
  }
  table['tuning'] = _tuning_experiment(base)
  table['wima_algorithms'] = paper_tables.wima_algorithms(base, TUNED)
  table['wima_swa_start'] = paper_tables.wima_swa_start(base, TUNED)
  table['wima_window_part'] = paper_tables.wima_window_part(table['mnist_wima'])
  table['ima_decays'] = paper_tables.ima_decays(table['ima'])
  table['ima_epoch_decay'] = paper_tables.ima_epoch_decay(
      table['ima_local_setup']
  )
  # IMA Table 1's shape: IMA on each algorithm of the table, alpha = 0.1,
  # 40 rounds as `ima`
  # (whose FedAvg and FedAdam rows these are); FedYogi, which IMA set back
  # (RESULTS.md sec. 2d), also with the schedule alone.
  table['ima_algorithms'] = _ima_experiment(
      attrs.evolve(base, total_rounds=rounds(40)),
      algorithms=paper_tables.IMA_TABLE_ALGORITHMS,
      schedule_only=('fedyogi',),
  )
  table['shakespeare'] = {
      'fedavg shakespeare W=10': attrs.evolve(
          base,
          task='shakespeare',
          client_batch_size=10,
          client_learning_rate=1.0,
          window_size=10,
          total_rounds=rounds(100),
          # One eval of both models on the full test set takes ~17 s.
          rounds_per_eval=5,
          summary_last_n=4,
      ),
  }
  return table


def shared_runs(
    table: dict[str, dict[str, config_lib.ExperimentConfig]],
) -> dict[tuple[str, str], tuple[str, str]]:
  """Rows that reuse another experiment's runs: {(experiment, row): owner}.

  A row whose config equals the config of a row earlier in `table`'s order
  (e.g. `ima_early_start`'s no-window rows, which are `ima_local_setup`'s)
  trains nothing of its own: its runs are the owner's (experiment, row),
  the first row with that config. Rows with a config of their own are not
  in the dict.
  """
  owners = {}
  shared = {}
  for name, rows in table.items():
    for label, config in rows.items():
      owner = owners.setdefault(config, (name, label))
      if owner != (name, label):
        shared[(name, label)] = owner
  return shared


def forked_runs(
    table: dict[str, dict[str, config_lib.ExperimentConfig]],
) -> dict[tuple[str, str], tuple[tuple[str, str], int]]:
  """Rows that fork from another row's run: {(experiment, row): (trunk, k)}.

  Trunks are the IMA rows (a window in 'broadcast' mode) that fork from no
  earlier trunk; every other row of its own (not `shared_runs`) forks from
  the trunk with the latest `forks.fork_round`, if any: e.g.
  `ima_local_setup`'s no-window and schedule-only rows from its IMA row, and
  `ima_early_start`'s IMA row from `ima_local_setup`'s (same seed). Rows
  train rounds k + 1.. only; their numbers are those of a run from round 1.
  """
  shared = shared_runs(table)
  own = [
      (name, label, config)
      for name, rows in table.items()
      for label, config in rows.items()
      if (name, label) not in shared
  ]

  def best_trunk(config, trunks):
    found = [(forks.fork_round(t, config), key) for key, t in trunks.items()]
    found = [(k, key) for k, key in found if k is not None]
    return max(found, key=lambda item: item[0], default=None)

  trunks = {}
  for name, label, config in own:
    if config.window_mode == 'broadcast' and not best_trunk(config, trunks):
      trunks[(name, label)] = config
  plan = {}
  for name, label, config in own:
    if (name, label) in trunks:
      continue
    best = best_trunk(config, trunks)
    if best is not None:
      plan[(name, label)] = (best[1], best[0])
  return plan


def _ima_experiment(
    base,
    baseline_schedule='constant',
    start_fraction=0.75,
    algorithms=('fedavg', 'fedadam'),
    schedule_only=('fedavg',),
):
  """{row label: config} of an IMA experiment on `base`'s rounds R.

  IMA starts at t_s = `start_fraction` R (the paper's Table 7: 0.75; its
  Table 2, the speed-up: 150 of 400); the summary covers the evals after
  round 0.75 R (the last quarter of the run), so a row's final accuracy
  does not depend on t_s. Rows per algorithm (FedAvg; FedAdam with server
  lr 0.01): no window (client lr schedule `baseline_schedule`); IMA (P = 5
  window in broadcast mode from t_s, with IMA's client lr schedule); and,
  for the algorithms in `schedule_only`, the schedule alone (a W = 1 window
  is the global model, so broadcasting it is a no-op), which separates the
  window's share of the gain from the schedule's.
  """
  start = int(start_fraction * base.total_rounds)
  base = attrs.evolve(
      base,
      summary_last_n=max(
          1,
          (base.total_rounds - int(0.75 * base.total_rounds))
          // base.rounds_per_eval,
      ),
  )
  window = dict(
      window_mode='broadcast',
      window_start_round=start,
      client_lr_schedule='ima',
  )
  rows = {
      'no window': dict(client_lr_schedule=baseline_schedule),
      'IMA': dict(window_size=5, **window),
  }
  rows['IMA schedule only W=1'] = dict(window_size=1, **window)
  return {
      f'{alg} alpha=0.1 {row}': attrs.evolve(
          base, **paper_tables.algorithm_flags(alg, 0.1, TUNED), **kwargs
      )
      for alg in algorithms
      for row, kwargs in rows.items()
      if alg in schedule_only or row != 'IMA schedule only W=1'
  }


def _tuning_experiment(base):
  """{row label: config}: each `TUNED` group over its grid, on validation.

  Rows are `'<group> lr=<client lr>'` (the `wsm` experiment's rows, no
  window) and `'fedavgm alpha=<a> slr=<server lr>'` (`mnist_wima`'s).
  """
  base = attrs.evolve(base, eval_split='validation')
  rows = {}
  for alg in ('fedavg', 'scaffold'):
    for loss in ('ce', 'wsm'):
      for lr in CLIENT_LR_GRID:
        rows[f'{alg} alpha=0.1 {loss} lr={lr}'] = attrs.evolve(
            base,
            algorithm=alg,
            dirichlet_alpha=0.1,
            client_loss=loss,
            client_learning_rate=lr,
        )
  for alpha in (0.0, 0.05):
    for slr in SERVER_LR_GRID:
      rows[f'fedavgm alpha={alpha} slr={slr}'] = attrs.evolve(
          base,
          algorithm='fedavgm',
          dirichlet_alpha=alpha,
          server_learning_rate=slr,
      )
  return rows
