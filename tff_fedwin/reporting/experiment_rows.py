"""One experiment's table rows and runs-CSV lines from its runs' summaries.

`scripts/reproduce_papers.py` writes, per experiment, one table row per
config (`row`: mean +- std over seeds of the window's and the global model's
last-N accuracy, of their per-seed difference and of the smoothness, and the
round + eval time), one `--runs_csv` line per run (`run_record`), and a note
on the rows whose runs belong to another experiment (`shared_note`). A
summary is the `summary.json` that `tff_fedwin.experiments.run_experiment`
writes.
"""

import numpy as np

# What a diverged run leaves in its directory instead of summary.json.
DIVERGED = 'diverged.txt'


def shared_note(name, configs, shared):
  """Lines naming the rows whose runs are another experiment's (or none)."""
  owned = [
      f"{label!r} = {owner[0]}'s {owner[1]!r}"
      for label in configs
      for owner in [shared.get((name, label))]
      if owner
  ]
  if not owned:
    return []
  return [
      'Same config, same runs (trained once, counted in both tables): '
      + '; '.join(owned)
      + '.',
      '',
  ]


def row(name, config, summaries, diverged=()):
  """The table row of config `name` from its seeds' summaries.

  A row with diverged seeds says so instead of averaging the others.
  """
  if diverged:
    return (
        f'| {name} | {config.total_rounds} | {len(summaries)} | diverged '
        f'(seeds {", ".join(diverged)}; see {DIVERGED}) | | | | | |'
    )

  def fmt(values):
    return f'{np.mean(values):.4f} +- {np.std(values):.4f}'

  def stat(model, key):
    return fmt([s[model]['accuracy'][key] for s in summaries])

  # Per seed, window minus global on the same trajectory (paired).
  gain = fmt(
      [
          s['window']['accuracy']['mean'] - s['global']['accuracy']['mean']
          for s in summaries
      ]
  )
  # Round + eval time summed over the CSV rows: counts resumed runs fully.
  wall = sum(s['total_round_and_eval_time_seconds'] for s in summaries)
  return (
      f'| {name} | {config.total_rounds} | {len(summaries)} | '
      f'{stat("window", "mean")} | {stat("global", "mean")} | {gain} | '
      f'{stat("window", "std")} | {stat("global", "std")} | '
      f'{wall / 60:.1f} |'
  )


# The columns of a --runs_csv line (`run_record`).
RUN_FIELDS = (
    'experiment',
    'row',
    'seed',
    'total_rounds',
    'round_and_eval_seconds',
    'last_call_wall_seconds',
    'resumed_from_round',
    'forked_from_round',
    'window_accuracy',
    'global_accuracy',
)


def run_record(name, label, seed, config, summary):
  """One line of --runs_csv: the time and last-N accuracies of one run."""
  return dict(
      experiment=name,
      row=label,
      seed=seed,
      total_rounds=config.total_rounds,
      round_and_eval_seconds=round(
          summary['total_round_and_eval_time_seconds'], 1
      ),
      last_call_wall_seconds=round(summary['wall_time_seconds'], 1),
      resumed_from_round=summary['resumed_from_round'],
      forked_from_round=summary.get('forked_from_round'),
      window_accuracy=round(summary['window']['accuracy']['mean'], 4),
      global_accuracy=round(summary['global']['accuracy']['mean'], 4),
  )
