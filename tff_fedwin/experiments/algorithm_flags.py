"""`--algorithm`: the algorithms, what each takes, and the checks of it.

The constants decide the help strings and messages that list algorithms;
`check_algorithm_flags` refuses, before any TFF work, the flags an
algorithm cannot take (the loss, the client schedule and momentum, weight
decay and sharpness, the client-state flags, FedDyn's alpha, Mime Lite's
window).

`--client_sharpness=sam|asam` trains the clients with SAM (FedSAM) or ASAM
(FedASAM) steps (`tff_fedwin.algorithms.sharpness`; docs/design.md,
"Sharpness-aware clients"), with radius `--sam_rho` (no default: the papers
tune it, e.g. IMA Table 5's 0.2 or SAM's 0.05) and ASAM's `--sam_eta`
(default 0.01, ASAM's). `config` is an `ExperimentConfig`.
"""

from typing import Any

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin.experiments import problems as problems_lib
from tff_fedwin.experiments import window_flags

ALGORITHMS = (
    'fedavg',
    'fedavgm',
    'fedadam',
    'fedyogi',
    'fedprox',
    'fednova',
    'mime_lite',
    'scaffold',
    'feddyn',
    'adabest',
    'fedcm',
    'fedacg',
    'mime',
    'fedgma',
    'fedfa',
)
# The algorithms with a model-sized state per client, and all of
# `build_client_state_process`'s (plain SGD clients, a W-slot window).
CLIENT_STATE_ALGORITHMS = choices.CLIENT_STATE_ALGORITHMS
CLIENT_STATE_FAMILY = choices.CLIENT_STATE_FAMILY
# The algorithms whose clients take `--client_momentum` (TFF's SGD(M) on
# the client-training core).
CLIENT_OPTIMIZER_ALGORITHMS = tuple(
    a for a in ALGORITHMS if a not in ('mime_lite', *CLIENT_STATE_FAMILY)
)
# Those whose clients take `--client_lr_schedule`: TFF's SGD(M) clients and
# the client-state family's SGD (not TFF's Mime Lite builder).
CLIENT_SCHEDULE_ALGORITHMS = tuple(a for a in ALGORITHMS if a != 'mime_lite')
# The algorithms whose clients take `--client_weight_decay` and
# `--client_sharpness`: the client-training core's (TFF's Mime Lite builder
# takes neither).
WEIGHT_DECAY_ALGORITHMS = tuple(a for a in ALGORITHMS if a != 'mime_lite')
# Those whose clients take `--client_sharpness`: not MIME, whose second
# gradient of a step is at x, nor FedFA, whose step reads the features.
SHARPNESS_ALGORITHMS = tuple(
    a for a in WEIGHT_DECAY_ALGORITHMS if a not in ('mime', 'fedfa')
)
# The algorithms with an adaptive server optimizer (`--server_epsilon`).
ADAPTIVE_SERVER_ALGORITHMS = ('fedadam', 'fedyogi')
# --client_sharpness: 'none' (plain client steps) or a sharpness kind.
CLIENT_SHARPNESS = ('none', *choices.SHARPNESS_KINDS)


def check_algorithm_flags(config: Any, problems: Any) -> None:
  """Adds a problem naming the flags for each flag `--algorithm` cannot take.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    problems: The `problems.Problems` each misfit is added to.
  """
  _check_sharpness(config, problems)
  if config.client_loss == 'wsm' and (
      config.task not in choices.CLASSIFICATION_TASKS
  ):
    problems.add(
        f'--client_loss=wsm needs one label per example: --task must be one '
        f'of {", ".join(choices.CLASSIFICATION_TASKS)}; got {config.task!r}.'
    )
  if config.server_epsilon is not None and (
      config.algorithm not in ADAPTIVE_SERVER_ALGORITHMS
  ):
    problems.add(
        '--server_epsilon is the adaptivity of --algorithm='
        f'{problems_lib.listed(ADAPTIVE_SERVER_ALGORITHMS)}; --algorithm={config.algorithm} '
        'has none.'
    )
  if config.algorithm == 'mime_lite' and config.client_loss != 'ce':
    problems.add('--algorithm=mime_lite supports --client_loss=ce only.')
  if config.client_lr_schedule != 'constant' and (
      config.algorithm not in CLIENT_SCHEDULE_ALGORITHMS
  ):
    problems.add(
        f'--client_lr_schedule={config.client_lr_schedule} is supported with '
        f'--algorithm={problems_lib.listed(CLIENT_SCHEDULE_ALGORITHMS)}; got '
        f'{config.algorithm!r}.'
    )
  if config.client_momentum and (
      config.algorithm not in CLIENT_OPTIMIZER_ALGORITHMS
  ):
    problems.add(
        '--client_momentum is supported with '
        f'--algorithm={problems_lib.listed(CLIENT_OPTIMIZER_ALGORITHMS)}; got '
        f'{config.algorithm!r}.'
    )
  if config.client_weight_decay and (
      config.algorithm not in WEIGHT_DECAY_ALGORITHMS
  ):
    problems.add(
        '--client_weight_decay is supported with '
        f'--algorithm={problems_lib.listed(WEIGHT_DECAY_ALGORITHMS)}; got '
        f"{config.algorithm!r} (TFF's Mime Lite builder takes no weight "
        'decay).'
    )
  if config.algorithm not in CLIENT_STATE_ALGORITHMS and (
      config.client_states != 'auto'
      or config.client_states_dir
      or config.client_state_transfer != 'auto'
  ):
    problems.add(
        '--client_states, --client_states_dir and --client_state_transfer '
        'are for the per-client states of --algorithm='
        f'{problems_lib.listed(CLIENT_STATE_ALGORITHMS)}; '
        f'--algorithm={config.algorithm} keeps none.'
    )
  _check_algorithm_hparams(config, problems)
  if (
      config.algorithm == 'mime_lite'
      and config.window_size
      and not window_flags.kept_by_program(config)
      # Unset, it is 1.0 for every task (`task_defaults`).
      and config.server_learning_rate not in (None, 1.0)
  ):
    problems.add(
        '--algorithm=mime_lite with the window in the state uses it as TFF '
        'model aggregator, which is exact only with '
        '--server_learning_rate=1.0; use --window_location=program.'
    )


def _check_sharpness(config: Any, problems: Any) -> None:
  """`--client_sharpness`, `--sam_rho` and `--sam_eta` fit the algorithm."""
  kind = config.client_sharpness
  if kind == 'none':
    if problems_lib.given(config, 'sam_rho') or problems_lib.given(
        config, 'sam_eta'
    ):
      problems.add(
          '--sam_rho and --sam_eta need --client_sharpness=sam or asam.'
      )
    return
  if config.algorithm not in SHARPNESS_ALGORITHMS:
    problems.add(
        f'--client_sharpness is supported with --algorithm='
        f'{", ".join(SHARPNESS_ALGORITHMS)}; got {config.algorithm!r} (TFF\'s '
        "Mime Lite builder runs its own client steps; MIME's second gradient "
        "of a step is at x; FedFA's step reads the features)."
    )
  if not config.sam_rho > 0:
    problems.add(
        f'--client_sharpness={kind} needs --sam_rho > 0, the neighbourhood '
        "radius (IMA Table 5's FedASAM: 0.2 with eta 0.05; SAM's own "
        f'default 0.05); got {config.sam_rho}.'
    )
  if kind == 'sam' and problems_lib.given(config, 'sam_eta'):
    problems.add(
        '--sam_eta is read by --client_sharpness=asam only (T_w = |w| + eta).'
    )


# Each algorithm's own hyperparameters: flag -> (allowed, the papers'
# values). Required with the algorithm (no default: the papers tune them per
# task), refused with any other; `allowed` is '> a', '>= a' or an interval.
ALGORITHM_HPARAMS = {
    'feddyn': {'feddyn_alpha': ('> 0', 'WiMA tunes it in {0.01, 0.001}')},
    'adabest': {
        'adabest_mu': ('> 0', 'WiMA tunes it in {0.01, 0.02}'),
        'adabest_beta': (
            'in [0, 1)',
            'WiMA tunes it in {0.5, 0.6, 0.7, 0.8, 0.9, 0.95}',
        ),
    },
    'fedcm': {
        'fedcm_alpha': ('in (0, 1]', 'WiMA tunes it in {0.05, 0.1, 0.5}')
    },
    'fedacg': {
        'fedacg_lambda': ('in [0, 1)', 'WiMA tunes it in {0.8, 0.85, 0.9}'),
        'fedacg_beta': ('>= 0', 'WiMA tunes it in {0.01, 0.001}'),
    },
    'mime': {
        'mime_beta': ('in [0, 1)', 'WiMA runs 0 (MIME SGD) and 0.9 (MIME SGDm)')
    },
    'fedgma': {'fedgma_threshold': ('in [0, 1]', 'IMA Table 5 uses 0.8')},
    'fedfa': {
        'fedfa_lambda': ('>= 0', "the IMA authors' code: 0.1"),
        'fedfa_momentum': (
            'in [0, 1]',
            "the IMA authors' code: 0.5; IMA Table 5: 0.9",
        ),
        'fedfa_calibration_start_round': (
            '>= 1',
            "the IMA authors' code: floor(R / 4) + 2 of R rounds",
        ),
    },
}


def _allows(allowed: str, value: float) -> bool:
  """Whether `value` is `allowed`: '> a', '>= a' or 'in [a, b)' (any
  brackets)."""
  if not allowed.startswith('in '):
    relation, bound = allowed.split()
    return value > float(bound) if relation == '>' else value >= float(bound)
  low, high = (float(bound) for bound in allowed[4:-1].split(','))
  above = low < value if allowed[3] == '(' else low <= value
  below = value < high if allowed[-1] == ')' else value <= high
  return above and below


def _check_algorithm_hparams(config: Any, problems: Any) -> None:
  """`ALGORITHM_HPARAMS`: set and in range with their algorithm, else unset."""
  for algorithm, hparams in ALGORITHM_HPARAMS.items():
    for flag, (allowed, tuned) in hparams.items():
      value = getattr(config, flag)
      if config.algorithm != algorithm:
        if value is not None:
          problems.add(
              f'--{flag} is for --algorithm={algorithm}; got '
              f'--algorithm={config.algorithm}.'
          )
        continue
      if value is None:
        problems.add(
            f'--algorithm={algorithm} needs --{flag} {allowed} (no default; '
            f'{tuned}); it is not set.'
        )
        continue
      with problems.check():
        checks.check_number(f'--{flag}', value)
        if not _allows(allowed, value):
          raise ValueError(f'--{flag} must be {allowed}; got {value!r}.')
