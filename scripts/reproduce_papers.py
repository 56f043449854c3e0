r"""Re-runs the paper-claim experiments (scaled to 2 cores) and tabulates them.

Each experiment is a list of named `ExperimentConfig`s; every config runs for
each seed through `tff_fedwin.training.run_experiment` (resuming if its output
exists), and the table reports, per config, the mean +- std over seeds of the
last-N-eval-round mean accuracy of the window model and of the global model,
the smoothness (std of the accuracy over those eval rounds) and wall time.
Evaluate-mode windows leave training unchanged, so one run gives the "with"
and "without window" numbers of a row.

  .venv/bin/python scripts/reproduce_papers.py --experiments=mnist_wima \
      --seeds=0,1,2 --root_output_dir=results --output=results/tables.md
"""

import json
import os

from absl import app
from absl import flags
import attrs
import numpy as np

from tff_fedwin.training import experiment

_EXPERIMENTS = flags.DEFINE_list(
    'experiments', ['mnist_wima', 'mnist_window_sweep', 'ima', 'wsm',
                    'shakespeare'], 'Which experiments to run.')
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds.')
_ROUNDS = flags.DEFINE_integer('total_rounds', 100, 'Rounds per run.')
_ROOT = flags.DEFINE_string('root_output_dir', 'results', 'Output root.')
_OUTPUT = flags.DEFINE_string('output', None, 'Write the tables here too.')

# 100 clients, 10% participation, label skew (the papers' structure).
_BASE = experiment.ExperimentConfig(
    task='mnist', num_clients=100, clients_per_round=10, client_epochs=1,
    client_batch_size=20, client_learning_rate=0.05, rounds_per_eval=2,
    rounds_per_checkpoint=10, summary_last_n=10)


def _experiments(total_rounds: int) -> dict[str, dict[str, experiment.ExperimentConfig]]:
  base = attrs.evolve(_BASE, total_rounds=total_rounds)
  start = int(0.75 * total_rounds)
  table = {}
  table['mnist_wima'] = {
      f'{alg} alpha={alpha} W=10': attrs.evolve(
          base, algorithm=alg, dirichlet_alpha=alpha, window_size=10,
          server_learning_rate=1.0)
      for alpha in (0.0, 0.05) for alg in ('fedavg', 'fedavgm', 'scaffold')
  }
  table['mnist_window_sweep'] = {
      f'fedavg alpha=0.05 W={w}': attrs.evolve(
          base, dirichlet_alpha=0.05, window_size=w) for w in (5, 10, 50, 100)
  }
  table['ima'] = {
      f'{alg} alpha=0.1 {"IMA" if ima else "no window"}': attrs.evolve(
          base, algorithm=alg, dirichlet_alpha=0.1,
          server_learning_rate=(0.01 if alg == 'fedadam' else 1.0),
          **(dict(window_size=5, window_mode='broadcast',
                  window_start_round=start, client_lr_schedule='ima')
             if ima else {}))
      for alg in ('fedavg', 'fedadam') for ima in (False, True)
  }
  table['wsm'] = {
      f'{alg} alpha=0.1 {loss} W=10': attrs.evolve(
          base, algorithm=alg, dirichlet_alpha=0.1, client_loss=loss,
          window_size=10)
      for alg in ('fedavg', 'scaffold') for loss in ('ce', 'wsm')
  }
  table['shakespeare'] = {
      'fedavg shakespeare W=10': attrs.evolve(
          base, task='shakespeare', client_batch_size=10,
          client_learning_rate=1.0, window_size=10),
  }
  return table


def _row(name, summaries):
  def stat(model, key):
    values = [s[model]['accuracy'][key] for s in summaries]
    return f'{np.mean(values):.4f} +- {np.std(values):.4f}'
  wall = sum(s['wall_time_seconds'] for s in summaries)
  return (f'| {name} | {len(summaries)} | {stat("window", "mean")} | '
          f'{stat("global", "mean")} | {stat("window", "std")} | '
          f'{stat("global", "std")} | {wall / 60:.1f} |')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  table = _experiments(_ROUNDS.value)
  unknown = set(_EXPERIMENTS.value) - set(table)
  if unknown:
    raise app.UsageError(f'--experiments: unknown {sorted(unknown)}; allowed '
                         f'{sorted(table)}.')
  lines = []
  for name in _EXPERIMENTS.value:
    lines += [f'### {name}', '', '| config | seeds | window acc (last N) | '
              'global acc (last N) | window smoothness | global smoothness | '
              'wall min |', '|---|---:|---:|---:|---:|---:|---:|']
    for label, config in table[name].items():
      summaries = []
      for seed in _SEEDS.value:
        run_name = f'{label.replace(" ", "_")}_seed{seed}'
        root = os.path.join(_ROOT.value, name)
        run = attrs.evolve(config, seed=int(seed), experiment_name=run_name,
                           root_output_dir=root)
        summary_path = os.path.join(root, run_name, 'summary.json')
        if not os.path.exists(summary_path):
          experiment.run_experiment(run)
        with open(summary_path) as f:
          summaries.append(json.load(f))
      lines.append(_row(label, summaries))
      print(lines[-1], flush=True)
    lines.append('')
  text = '\n'.join(lines)
  print(text)
  if _OUTPUT.value:
    with open(_OUTPUT.value, 'w') as f:
      f.write(text + '\n')


if __name__ == '__main__':
  app.run(main)
