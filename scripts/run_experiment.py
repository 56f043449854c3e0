r"""Federated training with window averaging (WiMA/IMA), WSM and SCAFFOLD.

Flags become a `tff_fedwin.experiments.ExperimentConfig`; everything else lives
in the library. Examples:

  # Federated MNIST, label skew, FedAvg + WiMA (both curves in one run):
  .venv/bin/python scripts/run_experiment.py --task=mnist --num_clients=100 \
      --dirichlet_alpha=0.05 --algorithm=fedavg --window_size=10 \
      --total_rounds=50 --experiment_name=mnist_wima

  # IMA: broadcast the mean of the last 5 models from round 75, IMA's LR decay:
  .venv/bin/python scripts/run_experiment.py --window_size=5 \
      --window_mode=broadcast --window_start_round=75 --total_rounds=100 \
      --client_lr_schedule=ima

Outputs under --root_output_dir/--experiment_name (by default
runs/experiment in the current directory; a run's first line names it):
metrics.csv, TensorBoard events, summary.json and checkpoints (a rerun with the
same flags resumes), run_config.json (the flags; a rerun with flags that change
the numbers is refused) and .lock (one process at a time; docs/runtime.md, "A
run directory").
"""

import os
import sys

# The checkout's root first on the path: the flag modules
# (`scripts/experiment_flags/`) are not part of the installed package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

from absl import app
from absl import flags

# Without TensorFlow: the flags (`scripts/experiment_flags/`) and their checks
# (`validate_config`), then the data files (`read_data_files`) come first, so a
# bad flag or file is refused in about a second; `experiments.run_experiment`
# imports TensorFlow and TFF on first use.
from scripts.experiment_flags import algorithm_flags
from scripts.experiment_flags import output_flags
from scripts.experiment_flags import task_flags
from scripts.experiment_flags import training_flags
from scripts.experiment_flags import window_flags
from tff_fedwin import errors
from tff_fedwin import experiments

# pylint: enable=g-import-not-at-top,wrong-import-position

# The groups' flags are this program's own in --helpshort.
for _module in (
    task_flags,
    algorithm_flags,
    window_flags,
    training_flags,
    output_flags,
):
  flags.adopt_module_key_flags(_module)

FLAGS = flags.FLAGS


def config_from_flags() -> experiments.ExperimentConfig:
  fields = [a.name for a in experiments.ExperimentConfig.__attrs_attrs__]
  return experiments.ExperimentConfig(
      **{name: FLAGS[name].value for name in fields}
  )


def checked_config(argv) -> experiments.ExperimentConfig:
  """The flags' config, checked with its data files; before TensorFlow.

  Raises `app.UsageError` for bad flags, the data files' one-line errors.
  """
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  config = config_from_flags()
  try:
    experiments.validate_config(config)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  experiments.read_data_files(config)  # Still without TensorFlow.
  return config


def train(config: experiments.ExperimentConfig) -> None:
  """Trains the checked `config`; prints where its outputs go, its summary."""
  from tff_fedwin.reporting import summary_text  # pylint: disable=g-import-not-at-top

  run_dir = os.path.join(config.root_output_dir, config.experiment_name)
  print(
      f'{config.experiment_name}: outputs in {os.path.abspath(run_dir)}',
      flush=True,
  )
  summary = experiments.run_experiment(config)
  print(summary_text.format_summary(summary, run_dir), flush=True)


def main(argv):
  """Trains; raises `app.UsageError` for bad flags before any TFF work."""
  train(checked_config(argv))


def _with_one_line_errors(fn, program: str):
  """`fn` with its user errors as one line on stderr and exit code 1.

  absl would print the whole module help for a `UsageError`; data, worker and
  divergence errors would end in a traceback. Bad flags are one line per
  problem (`validate_config` reports them all), then absl's help hint. With
  `--verbosity`, errors keep their traceback.
  """

  def wrapped(arg):
    try:
      return fn(arg)
    except app.UsageError as e:
      lines = [f'{program}: {line}' for line in str(e).splitlines()]
      sys.exit(
          '\n'.join(lines)
          + '\nPass --helpshort or --helpfull to see help on flags.'
      )
    except Exception as e:  # pylint: disable=broad-except
      if FLAGS['verbosity'].present or not _is_user_error(e):
        raise
      sys.exit(f'{program}: {e}')

  return wrapped


def _is_user_error(error: Exception) -> bool:
  # `tff_fedwin.errors` imports nothing: a bad flag or data file is told
  # apart before TensorFlow is imported.
  return isinstance(error, errors.UserError)


if __name__ == '__main__':
  _PROGRAM = os.path.basename(sys.argv[0])
  log_levels.run(
      _with_one_line_errors(train, _PROGRAM),
      before_tensorflow=_with_one_line_errors(checked_config, _PROGRAM),
  )
