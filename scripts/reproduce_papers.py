r"""Re-runs the paper-claim experiments (scaled to 2 cores) and tabulates them.

Each experiment is a list of named `ExperimentConfig`s; every config runs for
each seed through `tff_fedwin.experiments.run_experiment` (resuming if its
output exists, skipping it if its summary.json exists), and the table reports,
per config, the mean +- std over seeds of the last-N-eval-round mean accuracy of
the window model and of the global model, of their per-seed difference, of
the smoothness (std of the accuracy over those eval rounds), and the round +
eval time summed over seeds. A row with the same config as a row of an
earlier experiment (`papers.shared_runs`: `ima_early_start`'s baselines are
`ima_local_setup`'s) reads and, if needed, trains that row's runs, in that
experiment's directory. Evaluate-mode windows leave training unchanged,
so one run gives the "with" and "without window" numbers of a row. Rows that
train like another row up to a round k (`papers.forked_runs`: the no-IMA and
schedule-only rows like the IMA row before t_s) start from that row's
checkpoint of round k (`experiments.forks`, docs/design.md sec. 5.6), with
the numbers of a run from round 1; `--nofork` trains them from round 1. It also
plots, per experiment, the seed-mean accuracy curves. A config with several
windows (`window_sizes`, one trajectory) also gets a table of every window at
several horizons (rounds 120, 250, 500, ...), one with each window's columns of
a one-window run (W - global paired, smoothness) and a plot of each window's
curve.

  .venv/bin/python scripts/reproduce_papers.py   # everything: ~5 h (estimate)
  .venv/bin/python scripts/reproduce_papers.py \
      --experiments=mnist_window_horizon          # 6 runs of 500 rounds
  .venv/bin/python scripts/reproduce_papers.py --experiments=ima --seeds=0
  .venv/bin/python scripts/reproduce_papers.py \
      --experiments=ima_local_setup       # 15 runs of 300 rounds x 5 epochs
  .venv/bin/python scripts/reproduce_papers.py \
      --experiments=ima_early_start       # IMA from round 112: the speed-up
  .venv/bin/python scripts/reproduce_papers.py \
      --experiments=tuning                # 24 runs on the validation split
  .venv/bin/python scripts/reproduce_papers.py \
      --experiments=wima_swa_start        # WiMA Fig. 2: 18 runs of 40 rounds
  .venv/bin/python scripts/reproduce_papers.py \
      --experiments=ima_epoch_decay       # IMA Table 3's epoch decay: forks
                                          # of ima_local_setup's IMA at 220

Runs go to --root_output_dir (runs/reproduce), tables to --output
(results/tables.md), one line per run (its time and accuracies) to --runs_csv
(results/runs.csv), figures to --plot_dir/<experiment>.png (results/);
RESULTS.md quotes them (with each experiment's time). Tables and runs CSV
hold every experiment: a run of some experiments replaces only their section
and lines (`tff_fedwin.reporting.results_files`).
"""

import json
import os
import sys
from typing import Optional

from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
import attrs
import numpy as np

from tff_fedwin import errors
from tff_fedwin import experiments
from tff_fedwin import training
from tff_fedwin.experiments import forks as experiment_forks
from tff_fedwin.experiments import papers
from tff_fedwin.reporting import experiment_rows
from tff_fedwin.reporting import plots
from tff_fedwin.reporting import results_files
from tff_fedwin.reporting import rounds_to_target
from tff_fedwin.reporting import run_verdicts
from tff_fedwin.reporting import window_sweep

# pylint: enable=g-import-not-at-top,wrong-import-position

_EXPERIMENTS = flags.DEFINE_list(
    'experiments',
    list(papers.paper_experiments()),
    'Which experiments to run (default: all).',
)
_SEEDS = flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds.')
_ROUNDS = flags.DEFINE_integer(
    'total_rounds',
    None,
    "Rounds per run; default: each experiment's own "
    '(see `tff_fedwin.experiments.papers`).',
)
_ROOT = flags.DEFINE_string('root_output_dir', 'runs/reproduce', 'Output root.')
_OUTPUT = flags.DEFINE_string(
    'output',
    'results/tables.md',
    "Put the experiments' tables in this file, replacing their sections and "
    'keeping the others (empty: do not).',
)
_RUNS_CSV = flags.DEFINE_string(
    'runs_csv',
    'results/runs.csv',
    'Put one line per run (experiment, row, seed, rounds, times, accuracies) '
    "in this CSV, replacing the experiments' lines and keeping the others "
    '(empty: do not).',
)
_FORK = flags.DEFINE_bool(
    'fork',
    True,
    'Start the rows that train like another row up to a round k (e.g. the '
    'no-IMA and schedule-only rows like the IMA row before t_s) from that '
    "row's checkpoint of round k (`papers.forked_runs`; exact, docs/design.md "
    'sec. 5.6); --nofork trains every run from round 1.',
)
_PLOT_DIR = flags.DEFINE_string(
    'plot_dir',
    'results',
    'Write <experiment>.png (accuracy per round, mean '
    'over seeds, window solid and global dashed) here (empty: do not).',
)

# IMA's speed-up claim: each row's rounds to its algorithm's no-window final
# accuracy (reporting.rounds_to_target), for these experiments.
_SPEEDUP_EXPERIMENTS = ('ima', 'ima_local_setup', 'ima_early_start')


def _speedup_report(configs, run_dirs):
  """Per algorithm, the rounds-to-target table of its rows."""
  lines = []
  for algorithm in dict.fromkeys(c.algorithm for c in configs.values()):
    rows = {
        label: run_dirs[label]
        for label, config in configs.items()
        if config.algorithm == algorithm
    }
    baseline = next(l for l in rows if l.endswith('no window'))
    lines += [
        '',
        f'{algorithm}: rounds until the test accuracy first reaches the '
        f'final accuracy (mean of the last evals) of {baseline!r}, per seed:',
        '',
        *rounds_to_target.rounds_to_target_table(rows, baseline),
    ]
  return lines + ['']


def _run_or_read(run, run_dir):
  """The run's summary, training it first if needed; None if it diverged.

  A diverged run (`TrainingDivergedError`) leaves `diverged.txt` with the
  message, so a re-run reports it without training again.
  """
  diverged_path = os.path.join(run_dir, experiment_rows.DIVERGED)
  summary_path = os.path.join(run_dir, 'summary.json')
  if os.path.exists(diverged_path):
    return None
  if not experiment_forks.finished(run):
    try:
      experiments.run_experiment(run)
    except training.TrainingDivergedError as e:
      print(f'diverged: {e}', flush=True)
      with open(diverged_path, 'w') as f:
        f.write(f'{e}\n')
      return None
  with open(summary_path) as f:
    summary = json.load(f)
  summary['forked_from_round'] = training.forked_from_round(run_dir)
  return summary


def _run_config(table, shared, name, label, seed):
  """The config of one run: the row's (its owner's directory), the seed."""
  # A row with the config of an earlier experiment's row uses its runs.
  owner_name, owner_label = shared.get((name, label), (name, label))
  return attrs.evolve(
      table[name][label],
      seed=int(seed),
      experiment_name=f'{owner_label.replace(" ", "_")}_seed{seed}',
      root_output_dir=os.path.join(_ROOT.value, owner_name),
  )


def _fork_jobs(table, shared, names):
  """(k, trunk, target) of the selected experiments' forked runs, per seed."""
  jobs = []
  for (name, label), (trunk, k) in papers.forked_runs(table).items():
    if name in names:
      jobs += [
          (
              k,
              _run_config(table, shared, *trunk, seed),
              _run_config(table, shared, name, label, seed),
          )
          for seed in papers.EXPERIMENT_SEEDS.get(name, _SEEDS.value)
      ]
  return jobs


def _tuning_report(run_dirs):
  """Per `papers.TUNED` group, each value's validation accuracy and the best.

  The accuracy is the global model's, mean of the last N evals, mean over
  the seeds run. Says so when the best differs from `papers.TUNED`.
  """
  groups = {}
  for label, dirs in run_dirs.items():
    group, value = papers.tuning_group(label)
    accuracies = []
    for run_dir in dirs:
      if os.path.exists(os.path.join(run_dir, experiment_rows.DIVERGED)):
        accuracies.append(float('nan'))  # Never the best.
        continue
      with open(os.path.join(run_dir, 'summary.json')) as f:
        accuracies.append(json.load(f)['global']['accuracy']['mean'])
    groups.setdefault(group, {})[value] = float(np.mean(accuracies))
  lines = [
      '',
      'Validation accuracy of the global model (mean of the last N evals) '
      'per value; the best is picked:',
      '',
      '| group | value: validation accuracy | best | used (papers.TUNED) |',
      '|---|---|---:|---:|',
  ]
  for group, scores in groups.items():
    best = max(scores, key=lambda v: np.nan_to_num(scores[v], nan=-1.0))
    tried = ', '.join(
        f'{v:g}: ' + ('diverged' if np.isnan(a) else f'{a:.4f}')
        for v, a in scores.items()
    )
    used = papers.TUNED[group]
    flag = '' if used == best else ' (differs: update papers.TUNED)'
    lines.append(f'| {group} | {tried} | {best:g} | {used:g}{flag} |')
  return lines + ['']


def _plot(name, configs, run_dirs, plot_dir):
  """Writes `<plot_dir>/<name>.png`: per row, the seed-mean curves."""
  runs = []
  for label in configs:
    # Without a window the loop records the global model as window/* too:
    # both lines of such a row coincide.
    runs.append(
        (
            label,
            plots.mean_curves(
                [plots.read_eval_curves(d) for d in run_dirs[label]]
            ),
        )
    )
  path = os.path.join(plot_dir, f'{name}.png')
  plots.plot_runs(
      runs,
      path,
      figsize=(10.0, 6.5),
      title=f'{name}: test accuracy, mean over seeds (window '
      'solid, global dashed)',
  )
  print(f'wrote {path}')


# Rounds at which a run with several windows is summarized (those <= its end).
_HORIZONS = (120, 250, 500, 1000)


def _sweep_report(name, label, config, run_dirs, plot_dir):
  """A run with several windows: the W table at each horizon, and a plot.

  The plot goes to `<plot_dir>/<name>.png`.
  """
  horizons = [h for h in _HORIZONS if h < config.total_rounds]
  horizons.append(config.total_rounds)
  lines = [
      '',
      f'{label}: each window of the same trajectory, per seed the mean over '
      f'the last {config.summary_last_n} evals up to the round, mean +- std '
      'over seeds:',
      '',
      *window_sweep.horizon_table(
          run_dirs, config.window_size, horizons, config.summary_last_n
      ),
      '',
      'Each W minus the best W (by seed-mean) of the horizon, paired per '
      'seed (same trajectory), mean +- std over seeds:',
      '',
      *window_sweep.paired_difference_table(
          run_dirs, config.window_size, horizons, config.summary_last_n
      ),
      '',
      'Each W minus the global model, paired per seed (same trajectory), '
      'by the rule of RESULTS.md (`reporting.paired`):',
      '',
      *window_sweep.gain_table(
          run_dirs, config.window_size, horizons, config.summary_last_n
      ),
      '',
      f'Each window at round {config.total_rounds} with the columns of a '
      'one-window run (per seed over the last '
      f'{config.summary_last_n} evals; W - global paired per seed), mean '
      '+- std over seeds:',
      '',
      *window_sweep.window_table(
          run_dirs, config.window_size, config.summary_last_n
      ),
      '',
  ]
  if plot_dir:
    per_size = [
        window_sweep.window_accuracies(d, config.window_size) for d in run_dirs
    ]
    runs = [
        (
            f'W={w}' if w != window_sweep.GLOBAL_ROW else 'no window',
            plots.mean_curves([{'window': run[w]} for run in per_size]),
        )
        for w in per_size[0]
    ]
    path = os.path.join(plot_dir, f'{name}.png')
    plots.plot_runs(
        runs,
        path,
        curves=('window',),
        figsize=(10.0, 6.5),
        title=f'{name}: test accuracy of each window, mean over seeds',
    )
    print(f'wrote {path}')
  return lines


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  table = papers.paper_experiments(_ROUNDS.value)
  unknown = set(_EXPERIMENTS.value) - set(table)
  if unknown:
    raise app.UsageError(
        f'--experiments: unknown {sorted(unknown)}; allowed '
        f'{sorted(table)}.'
    )
  shared = papers.shared_runs(table)
  if _FORK.value:
    experiment_forks.fork_pending(_fork_jobs(table, shared, _EXPERIMENTS.value))
  lines = []
  records = []
  sections = {}
  for name in _EXPERIMENTS.value:
    first_line = len(lines)
    lines += [
        f'### {name}',
        '',
        '| config | rounds | seeds | window acc (last N) | global acc '
        '(last N) | window - global (paired) | window smoothness | '
        'global smoothness | round+eval min |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]
    run_dirs = {}
    for label, config in table[name].items():
      summaries = []
      diverged = []
      run_dirs[label] = []
      for seed in papers.EXPERIMENT_SEEDS.get(name, _SEEDS.value):
        run = _run_config(table, shared, name, label, seed)
        run_dirs[label].append(experiment_forks.run_dir(run))
        summary = _run_or_read(run, run_dirs[label][-1])
        if summary is None:  # Diverged: said in the row, not averaged.
          diverged.append(seed)
          continue
        summaries.append(summary)
        records.append(
            experiment_rows.run_record(name, label, seed, config, summaries[-1])
        )
      lines.append(experiment_rows.row(label, config, summaries, diverged))
      print(lines[-1], flush=True)
    lines.append('')
    lines += experiment_rows.shared_note(name, table[name], shared)
    lines += run_verdicts.verdict_table(records, name)
    sweeps = {l: c for l, c in table[name].items() if c.window_sizes}
    for label, config in sweeps.items():
      # One figure per sweep row: <experiment>_<row without its W list>.png.
      plot_name = name
      if len(sweeps) > 1:
        plot_name += '_' + label.split(' W=')[0].replace(' ', '_')
      lines += _sweep_report(
          plot_name, label, config, run_dirs[label], _PLOT_DIR.value
      )
    if name in _SPEEDUP_EXPERIMENTS:
      lines += _speedup_report(table[name], run_dirs)
    if name == 'tuning':
      lines += _tuning_report(run_dirs)
    if _PLOT_DIR.value and not sweeps and name != 'tuning':
      _plot(name, table[name], run_dirs, _PLOT_DIR.value)
    sections[name] = '\n'.join(lines[first_line:])
  print('\n'.join(lines))
  if _OUTPUT.value:
    results_files.merge_sections(_OUTPUT.value, sections, order=list(table))
  if _RUNS_CSV.value:
    results_files.merge_run_records(
        _RUNS_CSV.value, records, _EXPERIMENTS.value, experiment_rows.RUN_FIELDS
    )


def _main_with_one_line_errors(argv):
  """`main` with its user errors (e.g. a run directory another process holds,
  a run resumed with other flags, a dead worker) as one line and exit code 1;
  with `--verbosity` they keep their traceback."""
  try:
    main(argv)
  except errors.UserError as e:
    if log_levels.verbosity_requested(sys.argv):
      raise
    sys.exit(f'{os.path.basename(argv[0])}: {e}')


if __name__ == '__main__':
  log_levels.run(_main_with_one_line_errors)
