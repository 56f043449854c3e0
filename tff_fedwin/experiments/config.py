"""An experiment's configuration: one field per flag, and its checks.

`ExperimentConfig` holds what scripts/run_experiment.py's flags say (library
code never reads FLAGS); `validate_config` checks everything that can be
checked before any TFF work and reports every problem of a configuration at
once, one line each, naming the flags. Importable without TensorFlow:
`scripts/run_experiment.py` runs `validate_config` before its heavy imports,
so bad flags are refused in about a second.
"""

import contextlib
from typing import Optional

import attrs

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin import errors
from tff_fedwin.experiments import algorithm_flags
from tff_fedwin.experiments import data_flags
from tff_fedwin.experiments import problems as problems_lib
from tff_fedwin.experiments import schedule_flags
from tff_fedwin.experiments import window_flags
from tff_fedwin.experiments import worker_flags

TASKS = choices.TASKS
EVAL_SPLITS = choices.MNIST_HELD_OUT_SPLITS
LEAF_KINDS = choices.LEAF_KINDS
TEXT_LEVELS = choices.TEXT_LEVELS
TEXT_TOKENIZERS = choices.TEXT_TOKENIZERS
TEXT_MODELS = choices.TEXT_MODELS
# --model: 'auto' (the task's default) or one of the image models.
MODELS = ('auto', *choices.IMAGE_MODELS)
ALGORITHMS = algorithm_flags.ALGORITHMS
CLIENT_OPTIMIZER_ALGORITHMS = algorithm_flags.CLIENT_OPTIMIZER_ALGORITHMS
CLIENT_SCHEDULE_ALGORITHMS = algorithm_flags.CLIENT_SCHEDULE_ALGORITHMS
WEIGHT_DECAY_ALGORITHMS = algorithm_flags.WEIGHT_DECAY_ALGORITHMS
ADAPTIVE_SERVER_ALGORITHMS = algorithm_flags.ADAPTIVE_SERVER_ALGORITHMS
CLIENT_LOSSES = choices.CLIENT_LOSSES
WINDOW_MODES = choices.WINDOW_MODES
WINDOW_PARTS = choices.WINDOW_PARTS
# Where the window lives: 'state' (the process state: the window finalizer,
# aggregator or SCAFFOLD's), 'program' (kept by the round loop,
# tff_fedwin.algorithms.ProgramWindowRunner), 'auto' (by its size).
WINDOW_LOCATIONS = ('auto', 'state', 'program')
LR_SCHEDULES = schedule_flags.LR_SCHEDULES
CLIENT_SHARPNESS = algorithm_flags.CLIENT_SHARPNESS
WORKER_BINDS = ('loopback', 'all')
CLIENT_STATES = choices.CLIENT_STATE_KINDS
# How SCAFFOLD's sampled client states, the server state between rounds and
# the sampled clients' data reach the workers: as TFF values, as files the
# driver and the workers share (in tff_fedwin.algorithms:
# `client_state.state_files`, `resident_state`, `client_data_bundle`), or
# 'auto' (`worker_flags.resolve`).
CLIENT_STATE_TRANSFERS = ('auto', 'values', 'files')
SERVER_STATE_TRANSFERS = ('auto', 'values', 'files')
CLIENT_DATA_TRANSFERS = ('auto', 'values', 'files')

# `--window_sizes` parsed (used by the registry and the scripts).
parse_window_sizes = window_flags.parse_window_sizes


listed = problems_lib.listed
Problems = problems_lib.Problems


class InputDataError(errors.InputError):
  """The task's data cannot be used as configured.

  The message names the file and array, or the flag that does not fit the data.
  """


@contextlib.contextmanager
def as_input_data_error():
  """Re-raises a ValueError of the block (the data's checks) as InputDataError."""
  try:
    yield
  except ValueError as e:
    raise InputDataError(str(e)) from e


def check_clients_per_round(
    config: 'ExperimentConfig', num_train_clients: int
) -> None:
  """Raises InputDataError if `--clients_per_round` exceeds the clients."""
  if config.clients_per_round > num_train_clients:
    raise InputDataError(
        f'--clients_per_round ({config.clients_per_round}) must be <= the '
        f'number of training clients of --task={config.task} '
        f'({num_train_clients}).'
    )


@attrs.frozen
class ExperimentConfig:
  """Everything an experiment run depends on (one field per flag)."""

  task: str = 'mnist'
  data_npz: Optional[str] = None
  data_dir: Optional[str] = None
  leaf_kind: str = 'auto'
  leaf_images_dir: Optional[str] = None
  leaf_vocab_file: Optional[str] = None
  data_jsonl: Optional[str] = None
  text_level: str = 'word'
  text_tokenizer: str = 'words'
  vocab_size: int = 10000
  sequence_length: int = 20
  test_fraction: float = 0.2
  text_model: str = 'tff'
  stackoverflow_test_batches: int = choices.STACKOVERFLOW_TEST_BATCHES
  model: str = 'auto'
  # 0: the labels decide (1 + the largest label of train and test).
  num_classes: int = 0
  scale_integer_features: bool = True
  # 0: `choices.NPZ_MEMORY_FRACTION` of the memory available at the start.
  max_npz_bytes: int = 0
  eval_split: str = 'test'
  eval_per_client: bool = False
  cache_dir: Optional[str] = None
  use_synthetic_data: bool = False
  num_clients: int = 100
  dirichlet_alpha: float = 0.05
  algorithm: str = 'fedavg'
  client_loss: str = 'ce'
  proximal_strength: float = 0.01
  # Each algorithm's own (`algorithm_flags.ALGORITHM_HPARAMS`); None: unset,
  # required with its algorithm.
  feddyn_alpha: Optional[float] = None
  adabest_mu: Optional[float] = None
  adabest_beta: Optional[float] = None
  fedcm_alpha: Optional[float] = None
  fedacg_lambda: Optional[float] = None
  fedacg_beta: Optional[float] = None
  mime_beta: Optional[float] = None
  fedgma_threshold: Optional[float] = None
  fedfa_lambda: Optional[float] = None
  fedfa_momentum: Optional[float] = None
  fedfa_calibration_start_round: Optional[int] = None
  window_size: int = 0
  window_mode: str = 'evaluate'
  window_start_round: int = 0
  window_read_every: int = 1
  window_location: str = 'auto'
  window_sizes: str = ''
  window_part: str = 'all'
  client_lr_schedule: str = 'constant'
  # IMA Table 3's small constant rate and the bottom of each cyclic decay.
  client_lr_low: float = 5e-5
  client_lr_cycle: int = 20
  # Server-side SWA (FedSWA, WiMA's comparison): start round, 0 = off; cycle.
  swa_start_round: int = 0
  swa_cycle: int = 1
  total_rounds: int = 50
  clients_per_round: int = 10
  client_epochs: int = 1
  # IMA's epoch decay: one epoch fewer every this many rounds from
  # window_start_round on, down to 1; 0 = off.
  client_epochs_decay_every: int = 0
  client_batch_size: int = 20
  client_max_elements: int = 0
  client_shuffle_buffer: Optional[int] = None
  # None: the task's default (`task_defaults`), set by `run_experiment`.
  client_learning_rate: Optional[float] = None
  client_momentum: float = 0.0
  client_weight_decay: float = 0.0
  client_sharpness: str = 'none'
  sam_rho: float = 0.0
  sam_eta: float = 0.01
  server_learning_rate: Optional[float] = None
  # FedAdam/FedYogi's epsilon; None: the task's (`task_defaults`), else TFF's.
  server_epsilon: Optional[float] = None
  seed: int = 0
  rounds_per_eval: int = 5
  rounds_per_checkpoint: int = 10
  summary_last_n: int = 5
  client_states: str = 'auto'
  client_states_dir: str = ''
  client_state_transfer: str = 'auto'
  server_state_transfer: str = 'auto'
  client_data_transfer: str = 'auto'
  # Relative: in the current directory (the script prints the run's path).
  root_output_dir: str = 'runs'
  experiment_name: str = 'experiment'
  workers: str = ''
  worker_bind: str = 'loopback'
  shared_dir: Optional[str] = None


# Each integer flag -> its least value.
_INT_MINIMUMS = {
    'total_rounds': 1,
    'clients_per_round': 1,
    'client_epochs': 1,
    'client_batch_size': 1,
    'rounds_per_eval': 1,
    'rounds_per_checkpoint': 1,
    'num_clients': 1,
    'window_read_every': 1,
    'summary_last_n': 1,
    'swa_cycle': 1,
    'client_lr_cycle': 2,
    'window_size': 0,
    'window_start_round': 0,
    'swa_start_round': 0,
    'seed': 0,
    'client_max_elements': 0,
    'client_epochs_decay_every': 0,
    'stackoverflow_test_batches': 0,
    'num_classes': 0,
}


def _check_values(config: ExperimentConfig, problems: Problems) -> None:
  """Each flag on its own: choices, integer and number ranges, names."""
  for flag, allowed in (
      ('task', TASKS),
      ('algorithm', ALGORITHMS),
      ('client_loss', CLIENT_LOSSES),
      ('window_mode', WINDOW_MODES),
      ('window_location', WINDOW_LOCATIONS),
      ('window_part', WINDOW_PARTS),
      ('client_lr_schedule', LR_SCHEDULES),
      ('client_sharpness', CLIENT_SHARPNESS),
      ('worker_bind', WORKER_BINDS),
      ('client_states', CLIENT_STATES),
      ('client_state_transfer', CLIENT_STATE_TRANSFERS),
      ('server_state_transfer', SERVER_STATE_TRANSFERS),
      ('client_data_transfer', CLIENT_DATA_TRANSFERS),
      ('eval_split', EVAL_SPLITS),
      ('leaf_kind', LEAF_KINDS),
      ('text_level', TEXT_LEVELS),
      ('text_tokenizer', TEXT_TOKENIZERS),
      ('text_model', TEXT_MODELS),
      ('model', MODELS),
  ):
    with problems.check():
      checks.check_choice(f'--{flag}', getattr(config, flag), allowed)
  if not checks.is_directory_name(config.experiment_name):
    problems.add(
        '--experiment_name must be one directory name (no "/", not "." or '
        f'".."); got {config.experiment_name!r}.'
    )
  for flag, minimum in _INT_MINIMUMS.items():
    with problems.check():
      checks.check_int(f'--{flag}', getattr(config, flag), minimum=minimum)
  if config.client_shuffle_buffer is not None:
    with problems.check():
      checks.check_int(
          '--client_shuffle_buffer', config.client_shuffle_buffer, minimum=1
      )
  with problems.check():
    checks.check_number(
        '--dirichlet_alpha',
        config.dirichlet_alpha,
        minimum=0,
        allow_infinity=True,
    )
  for flag in (
      'proximal_strength',
      'client_weight_decay',
      'sam_rho',
      'sam_eta',
  ):
    with problems.check():
      checks.check_number(f'--{flag}', getattr(config, flag), minimum=0)
  for flag in (
      'client_learning_rate',
      'server_learning_rate',
      'server_epsilon',
      'client_lr_low',
  ):
    if getattr(config, flag) is not None:
      with problems.check():
        checks.check_number(f'--{flag}', getattr(config, flag), positive=True)
  with problems.check():
    if (
        not 0
        <= checks.check_number('--client_momentum', config.client_momentum)
        < 1
    ):
      raise ValueError(
          '--client_momentum must be in [0, 1); got '
          f'{config.client_momentum!r}.'
      )


def validate_config(config: ExperimentConfig) -> None:
  """Raises ValueError listing every problem of `config`, one line each.

  Every flag's own value is checked first (choices, ranges, names), each on
  its own; the checks of how the flags fit together (data, window,
  SWA, algorithm, workers) then run if all values passed, since they compare and
  divide them, and report every misfit. Each line names its flags.
  """
  problems = Problems()
  _check_values(config, problems)
  problems.raise_if_any()
  data_flags.check_data_flags(config, problems)
  window_flags.check_window(config, problems)
  schedule_flags.check_schedule_flags(config, problems)
  schedule_flags.check_swa_flags(config, problems)
  algorithm_flags.check_algorithm_flags(config, problems)
  worker_flags.check_worker_flags(config, problems)
  problems.raise_if_any()
