"""An experiment's configuration: one field per flag, and its checks.

`ExperimentConfig` holds what scripts/run_experiment.py's flags say (library
code never reads FLAGS); `validate_config` checks everything that can be
checked before any TFF work and names the flag in every message.
"""

from typing import Optional

import attrs

from tff_fedwin import checks
from tff_fedwin import runtime
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import program_window_runner
from tff_fedwin.experiments import context
from tff_fedwin.experiments import run_record
from tff_fedwin.tasks import registry
from tff_fedwin.training import checkpoints
from tff_fedwin.training import client_state_spec
from tff_fedwin.training import client_state_stores
from tff_fedwin.training import divergence
from tff_fedwin.training import outputs
from tff_fedwin.training import run_lock

TASKS = registry.TASKS
EVAL_SPLITS = registry.EVAL_SPLITS
ALGORITHMS = (
    'fedavg',
    'fedavgm',
    'fedadam',
    'fedyogi',
    'fedprox',
    'mime_lite',
    'scaffold',
)
CLIENT_LOSSES = client_training.CLIENT_LOSSES
WINDOW_MODES = fed_win.WINDOW_MODES
# Where the window lives: 'state' (the process state: the window finalizer,
# aggregator or SCAFFOLD's), 'program' (kept by the round loop,
# tff_fedwin.algorithms.ProgramWindowRunner), 'auto' (by its size).
WINDOW_LOCATIONS = ('auto', 'state', 'program')
LR_SCHEDULES = ('constant', 'decay', 'ima')
WORKER_BINDS = ('loopback', 'all')
CLIENT_STATES = client_state_stores.KINDS
# How SCAFFOLD's sampled client states reach the workers: 'values' (TFF
# values), 'files' (files the driver and the workers share,
# tff_fedwin.algorithms.scaffold.state_files), 'auto' (files with the local
# workers this run starts, values with --workers listing running ones).
CLIENT_STATE_TRANSFERS = ('auto', 'values', 'files')
# How the server state travels between rounds: 'values' (TFF values, both
# ways, every round), 'files' (kept in files the driver and the workers share,
# tff_fedwin.algorithms.resident_state), 'auto' (as CLIENT_STATE_TRANSFERS).
SERVER_STATE_TRANSFERS = ('auto', 'values', 'files')
# How the sampled clients' data reach the workers: 'values' (each round's
# datasets as TFF values), 'files' (the training examples written once as a
# tensor bundle in the run directory, from which the workers build each
# client's dataset by id, tff_fedwin.algorithms.client_data_bundle), 'auto'
# (as CLIENT_STATE_TRANSFERS).
CLIENT_DATA_TRANSFERS = ('auto', 'values', 'files')


class InputDataError(ValueError):
  """The task's data cannot be used as configured.

  The message names the file and array, or the flag that does not fit the data.
  """


# Errors a user can act on from their message alone; scripts print them as one
# line (see scripts/run_experiment.py).
USER_ERRORS = (
    InputDataError,
    registry.DataUnavailableError,
    runtime.WorkerConfinementError,
    divergence.TrainingDivergedError,
    client_state_spec.ClientStatesError,
    program_window_runner.WindowFilesError,
    program_window_runner.WindowSizesMismatchError,
    checkpoints.CheckpointMismatchError,
    run_lock.RunDirectoryLockedError,
    run_record.RunConfigMismatchError,
    run_record.WorkerLostError,
)


@attrs.frozen
class ExperimentConfig:
  """Everything an experiment run depends on (one field per flag)."""

  task: str = 'mnist'
  data_npz: Optional[str] = None
  scale_integer_features: bool = True
  eval_split: str = 'test'
  cache_dir: Optional[str] = None
  use_synthetic_data: bool = False
  num_clients: int = 100
  dirichlet_alpha: float = 0.05
  algorithm: str = 'fedavg'
  client_loss: str = 'ce'
  proximal_strength: float = 0.01
  window_size: int = 0
  window_mode: str = 'evaluate'
  window_start_round: int = 0
  window_read_every: int = 1
  window_location: str = 'auto'
  window_sizes: str = ''
  client_lr_schedule: str = 'constant'
  total_rounds: int = 50
  clients_per_round: int = 10
  client_epochs: int = 1
  client_batch_size: int = 20
  client_learning_rate: float = 0.05
  client_momentum: float = 0.0
  server_learning_rate: float = 1.0
  seed: int = 0
  rounds_per_eval: int = 5
  rounds_per_checkpoint: int = 10
  summary_last_n: int = 5
  client_states: str = 'auto'
  client_states_dir: str = ''
  client_state_transfer: str = 'auto'
  server_state_transfer: str = 'auto'
  client_data_transfer: str = 'auto'
  root_output_dir: str = '/tmp/tff_fedwin'
  experiment_name: str = 'experiment'
  workers: str = ''
  worker_bind: str = 'loopback'


def _check_values(config: ExperimentConfig) -> None:
  """Each flag on its own: choices, integer and number ranges, names."""
  for flag, allowed in (
      ('task', TASKS),
      ('algorithm', ALGORITHMS),
      ('client_loss', CLIENT_LOSSES),
      ('window_mode', WINDOW_MODES),
      ('window_location', WINDOW_LOCATIONS),
      ('client_lr_schedule', LR_SCHEDULES),
      ('worker_bind', WORKER_BINDS),
      ('client_states', CLIENT_STATES),
      ('client_state_transfer', CLIENT_STATE_TRANSFERS),
      ('server_state_transfer', SERVER_STATE_TRANSFERS),
      ('client_data_transfer', CLIENT_DATA_TRANSFERS),
      ('eval_split', EVAL_SPLITS),
  ):
    checks.check_choice(f'--{flag}', getattr(config, flag), allowed)
  if not outputs.is_directory_name(config.experiment_name):
    raise ValueError(
        '--experiment_name must be one directory name (no "/", not "." or '
        f'".."); got {config.experiment_name!r}.'
    )
  for flag in (
      'total_rounds',
      'clients_per_round',
      'client_epochs',
      'client_batch_size',
      'rounds_per_eval',
      'rounds_per_checkpoint',
      'num_clients',
      'window_read_every',
      'summary_last_n',
  ):
    checks.check_int(f'--{flag}', getattr(config, flag), minimum=1)
  for flag in ('window_size', 'window_start_round', 'seed'):
    checks.check_int(f'--{flag}', getattr(config, flag), minimum=0)
  checks.check_number(
      '--dirichlet_alpha',
      config.dirichlet_alpha,
      minimum=0,
      allow_infinity=True,
  )
  checks.check_number(
      '--proximal_strength', config.proximal_strength, minimum=0
  )
  for flag in ('client_learning_rate', 'server_learning_rate'):
    checks.check_number(f'--{flag}', getattr(config, flag), positive=True)
  if (
      not 0
      <= checks.check_number('--client_momentum', config.client_momentum)
      < 1
  ):
    raise ValueError(
        f'--client_momentum must be in [0, 1); got {config.client_momentum!r}.'
    )


def _check_data(config: ExperimentConfig) -> None:
  """--data_npz (npz only), --eval_split=validation (mnist only), clients."""
  if config.task == 'npz' and not config.data_npz:
    raise ValueError('--data_npz is required with --task=npz.')
  if config.data_npz and config.task != 'npz':
    raise ValueError('--data_npz is only used with --task=npz.')
  if config.eval_split == 'validation' and config.task != 'mnist':
    raise ValueError(
        '--eval_split=validation needs --task=mnist (its 10,000-example '
        f'validation split); --task={config.task} has a test set only.'
    )
  if config.task in ('mnist', 'npz') and (
      config.clients_per_round > config.num_clients
  ):
    raise ValueError(
        f'--clients_per_round ({config.clients_per_round}) must be <= '
        f'--num_clients ({config.num_clients}).'
    )


def client_state_transfer(config: ExperimentConfig) -> str:
  """`'values'` or `'files'`: `--client_state_transfer`, `auto` resolved.

  `auto` is `'files'` when this run starts its workers (they share its file
  system) and `'values'` when `--workers` lists running ones, which may be on
  other machines.
  """
  return _resolve_transfer(config.client_state_transfer, config.workers)


def server_state_transfer(config: ExperimentConfig) -> str:
  """`'values'` or `'files'`: `--server_state_transfer`, `auto` resolved
  as `--client_state_transfer`'s (files with the workers this run starts)."""
  return _resolve_transfer(config.server_state_transfer, config.workers)


def client_data_transfer(config: ExperimentConfig) -> str:
  """`'values'` or `'files'`: `--client_data_transfer`, `auto` resolved as
  `--client_state_transfer`'s (files with the workers this run starts)."""
  return _resolve_transfer(config.client_data_transfer, config.workers)


def _resolve_transfer(transfer: str, workers: str) -> str:
  """`transfer`, or for `'auto'` `'files'` unless `workers` lists running
  workers (which may be on other machines)."""
  if transfer != 'auto':
    return transfer
  _, addresses = context.parse_workers(workers)
  return 'values' if addresses else 'files'


def parse_window_sizes(config: ExperimentConfig) -> tuple[int, ...]:
  """`--window_sizes` '5,50,200' -> (5, 50, 200); '' -> ().

  Raises:
    ValueError: naming `--window_sizes`, unless a comma list of distinct
      integers 1..--total_rounds other than --window_size.
  """
  text = config.window_sizes.strip()
  if not text:
    return ()
  items = [item.strip() for item in text.split(',')]
  allowed = (
      f'a comma list of distinct integers 1-{config.total_rounds} '
      '(--total_rounds) other than --window_size '
      f'({config.window_size})'
  )
  if not all(item.isdecimal() and item.isascii() for item in items):
    raise ValueError(f'--window_sizes must be {allowed}; got {text!r}.')
  sizes = tuple(int(item) for item in items)
  if (
      len(set(sizes)) != len(sizes)
      or config.window_size in sizes
      or not all(1 <= size <= config.total_rounds for size in sizes)
  ):
    raise ValueError(f'--window_sizes must be {allowed}; got {text!r}.')
  return sizes


def _kept_by_program(config: ExperimentConfig) -> bool:
  """The window is surely kept by the program (`--window_sizes` needs it)."""
  return config.window_location == 'program' or (
      config.window_location == 'auto' and bool(config.window_sizes.strip())
  )


def _readable_hint(size: int, every: int) -> str:
  """The extra sizes a state window of W = `size`, E = `every` holds."""
  sizes = list(range(size - every, 0, -every))[::-1]
  if not sizes:
    return 'none with these flags'
  return ', '.join(map(str, sizes[:3])) + (', ...' if len(sizes) > 3 else '')


def _check_state_window_sizes(config: ExperimentConfig) -> None:
  """Extra sizes the state's window holds: W' < W, W - W' a multiple of E.

  The state keeps the last W models in ceil(W/E) segment sums; a window of
  W' is whole segments exactly then (docs/design.md sec. 1.11).
  """
  size, every = config.window_size, config.window_read_every
  for extra in parse_window_sizes(config):
    if extra > size or (size - extra) % every:
      raise ValueError(
          f'--window_sizes ({config.window_sizes}) with '
          f'--window_location=state must each be < --window_size ({size}) '
          f'with --window_size minus it a multiple of --window_read_every '
          f'({every}), i.e. {_readable_hint(size, every)}; got {extra}. Use '
          '--window_location=program for any sizes.'
      )


def _check_window(config: ExperimentConfig) -> None:
  """The window flags fit the run (docs/design.md sec. 1)."""
  if config.window_size > config.total_rounds:
    raise ValueError(
        f'--window_size ({config.window_size}) must be <= --total_rounds '
        f'({config.total_rounds}): the window model is active from round '
        'max(W, --window_start_round) on, so it would never be used.'
    )
  if config.window_start_round > config.total_rounds:
    raise ValueError(
        f'--window_start_round ({config.window_start_round}) must be <= '
        f'--total_rounds ({config.total_rounds}).'
    )
  if config.window_size == 0 and (
      config.window_mode != 'evaluate'
      or config.window_start_round
      or config.window_read_every != 1
      or config.window_location != 'auto'
      or config.window_sizes.strip()
  ):
    raise ValueError(
        '--window_mode, --window_start_round, --window_read_every, '
        '--window_location and --window_sizes need --window_size >= 1.'
    )
  parse_window_sizes(config)
  if config.window_location == 'state':
    _check_state_window_sizes(config)
  if config.window_read_every > 1 and (
      config.rounds_per_eval % config.window_read_every
      or config.total_rounds % config.window_read_every
  ):
    raise ValueError(
        f'--rounds_per_eval ({config.rounds_per_eval}) and --total_rounds '
        f'({config.total_rounds}) must be multiples of --window_read_every '
        f'({config.window_read_every}): the window model exists only at those '
        'rounds.'
    )
  if (
      config.algorithm == 'scaffold'
      and config.window_read_every != 1
      and not _kept_by_program(config)
  ):
    raise ValueError(
        '--window_read_every is not supported with --algorithm=scaffold and '
        'the window in the state (it keeps W slots); use '
        '--window_location=program.'
    )
  if config.window_mode == 'broadcast' and config.window_read_every != 1:
    raise ValueError(
        '--window_read_every must be 1 with ' '--window_mode=broadcast.'
    )


def _check_algorithm(config: ExperimentConfig) -> None:
  """The algorithm supports the loss, the schedule and the window."""
  if config.client_loss == 'wsm' and (
      config.task not in registry.CLASSIFICATION_TASKS
  ):
    raise ValueError(
        f'--client_loss=wsm needs one label per example: --task must be one '
        f'of {", ".join(registry.CLASSIFICATION_TASKS)}; got {config.task!r}.'
    )
  if config.algorithm == 'mime_lite' and config.client_loss != 'ce':
    raise ValueError('--algorithm=mime_lite supports --client_loss=ce only.')
  if config.client_lr_schedule != 'constant' and config.algorithm in (
      'mime_lite',
      'scaffold',
  ):
    raise ValueError(
        f'--client_lr_schedule={config.client_lr_schedule} is supported with '
        '--algorithm=fedavg, '
        f'fedavgm, fedadam, fedyogi or fedprox; got {config.algorithm!r}.'
    )
  if config.client_momentum and config.algorithm in ('mime_lite', 'scaffold'):
    raise ValueError(
        '--client_momentum is supported with --algorithm=fedavg, fedavgm, '
        f'fedadam, fedyogi or fedprox; got {config.algorithm!r}.'
    )
  if config.algorithm != 'scaffold' and (
      config.client_states != 'auto'
      or config.client_states_dir
      or config.client_state_transfer != 'auto'
  ):
    raise ValueError(
        '--client_states, --client_states_dir and --client_state_transfer '
        'are for the per-client states of --algorithm=scaffold; '
        f'--algorithm={config.algorithm} keeps none.'
    )
  if (
      config.algorithm == 'mime_lite'
      and config.window_size
      and not _kept_by_program(config)
      and config.server_learning_rate != 1.0
  ):
    raise ValueError(
        '--algorithm=mime_lite with the window in the state uses it as TFF '
        'model aggregator, which is exact only with '
        '--server_learning_rate=1.0; use --window_location=program.'
    )


def validate_config(config: ExperimentConfig) -> None:
  """Raises ValueError naming the flag for any bad or inconsistent value."""
  _check_values(config)
  _check_data(config)
  _check_window(config)
  _check_algorithm(config)
  _, addresses = context.parse_workers(config.workers)
  if addresses and config.worker_bind != 'loopback':
    raise ValueError(
        '--worker_bind applies to the workers this run starts; '
        '--workers lists running ones.'
    )
