"""run_experiment.py's output flags: outputs, stores, transfers and workers."""

from absl import flags

from tff_fedwin import experiments

_DEFAULTS = experiments.ExperimentConfig()

flags.DEFINE_integer(
    'rounds_per_eval',
    _DEFAULTS.rounds_per_eval,
    'Evaluate every this many rounds.',
)
flags.DEFINE_integer(
    'rounds_per_checkpoint',
    _DEFAULTS.rounds_per_checkpoint,
    'Checkpoint every this many rounds.',
)
flags.DEFINE_integer(
    'summary_last_n',
    _DEFAULTS.summary_last_n,
    'Summary: mean over the last N eval rounds.',
)
flags.DEFINE_enum(
    'client_states',
    _DEFAULTS.client_states,
    list(experiments.CLIENT_STATES),
    'Where SCAFFOLD keeps the client states: memory (RAM; a '
    'checkpoint writes all), disk (files; RAM holds one round, a '
    'checkpoint writes the clients updated since the last), or auto '
    '(disk when clients x state size > 1 GiB).',
)
flags.DEFINE_string(
    'client_states_dir',
    _DEFAULTS.client_states_dir,
    'Directory of the disk client states (default: '
    'checkpoints/client_states of the run).',
)
flags.DEFINE_enum(
    'client_state_transfer',
    _DEFAULTS.client_state_transfer,
    list(experiments.CLIENT_STATE_TRANSFERS),
    "How SCAFFOLD's sampled client states reach the workers: files (in "
    'the run directory, which the workers must see; several times faster), '
    'values (TFF values), or auto (files with the workers this run starts, '
    'values with --workers=host:port,...).',
)
flags.DEFINE_enum(
    'server_state_transfer',
    _DEFAULTS.server_state_transfer,
    list(experiments.SERVER_STATE_TRANSFERS),
    'How the server state travels between rounds: files (kept in the run '
    "directory, which the workers must see; a round saves the state's "
    'round trip through TFF), values (TFF values), or auto (files with the '
    'workers this run starts, values with --workers=host:port,...).',
)
flags.DEFINE_enum(
    'client_data_transfer',
    _DEFAULTS.client_data_transfer,
    list(experiments.CLIENT_DATA_TRANSFERS),
    "How the sampled clients' data reach the workers: files (the workers "
    "build each client's dataset by id, from the database of EMNIST and "
    'StackOverflow, else from the training examples written once to the run '
    "directory; the workers must see them), values (each round's datasets "
    'as TFF values), or auto (files with the workers this run starts, values '
    'with --workers=host:port,...).',
)
flags.DEFINE_string(
    'root_output_dir',
    _DEFAULTS.root_output_dir,
    'Root of all outputs (relative: in the current directory); the run '
    'prints its directory in its first line.',
)
flags.DEFINE_string(
    'experiment_name', _DEFAULTS.experiment_name, 'Subdirectory of this run.'
)
flags.DEFINE_string(
    'workers',
    _DEFAULTS.workers,
    'Empty: one local TFF '
    'worker; N: N local workers; host:port,...: remote ones.',
)
flags.DEFINE_enum(
    'worker_bind',
    _DEFAULTS.worker_bind,
    list(experiments.WORKER_BINDS),
    'Interfaces the workers this run starts listen on: '
    'loopback (default; refuses to start if that cannot be '
    'enforced) or all (unauthenticated; trusted networks only).',
)
flags.DEFINE_string(
    'shared_dir',
    _DEFAULTS.shared_dir,
    'A directory the driver and every worker see at this path (a shared '
    'mount), where the files transfer modes put their files (client and '
    'server states, client data; default: the run directory, fine for the '
    'workers this run starts), in <experiment_name>-<run_id of '
    "run_config.json>, the run's own, held while it runs. Checked before the "
    'first round. With it, auto transfers are files also with '
    '--workers=host:port,...',
)


def _check_workers(value: str) -> bool:
  try:
    experiments.parse_workers(value)
  except ValueError as e:
    raise flags.ValidationError(str(e)) from None
  return True


flags.register_validator('workers', _check_workers)
