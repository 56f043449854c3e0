"""run_experiment.py's training flags: rounds, clients, optimizers and seed."""

from absl import flags

from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import task_defaults

_DEFAULTS = experiments.ExperimentConfig()
_listed = config_lib.listed
# The algorithms whose server steps as FedAvg's (plain SGD): their server
# learning rate is FedAvg's.
_AS_FEDAVG = tuple(
    a
    for a in experiments.ALGORITHMS
    if a != 'fedavg' and task_defaults.SERVER_OPTIMIZERS[a] == 'sgd'
)


def _task_defaults_help(flag: str) -> str:
  """The per-task defaults of `flag` (`client_learning_rate` or
  `server_learning_rate`, `task_defaults.LEARNING_RATES`)."""
  rates = task_defaults.LEARNING_RATES
  if flag == 'client_learning_rate':
    shown = {k: f'{rates[k][0]:.3g}' for k in task_defaults.PREDICTION_KINDS}
  else:
    shown = {
        k: ', '.join(
            f'{alg} {rates[k][1][task_defaults.SERVER_OPTIMIZERS[alg]]:.3g}'
            for alg in ('fedavg', 'fedavgm', 'fedadam', 'fedyogi')
        )
        for k in task_defaults.PREDICTION_KINDS
    }
  return (
      "unset: the task's default: classification "
      f'{shown[task_defaults.CLASSIFICATION]}; next word (stackoverflow, '
      f'text, leaf reddit) {shown[task_defaults.NEXT_WORD]}; next character '
      '(shakespeare, leaf shakespeare, text --text_level=char) '
      f'{shown[task_defaults.NEXT_CHAR]} (Reddi et al. 2021; docs/data.md)'
  )


flags.DEFINE_integer('total_rounds', _DEFAULTS.total_rounds, 'Rounds.')
flags.DEFINE_integer(
    'clients_per_round',
    _DEFAULTS.clients_per_round,
    'Clients sampled per round.',
)
flags.DEFINE_integer('client_epochs', _DEFAULTS.client_epochs, 'Local epochs.')
flags.DEFINE_integer(
    'client_epochs_decay_every',
    _DEFAULTS.client_epochs_decay_every,
    "IMA's epoch decay: from --window_start_round on, one local epoch fewer "
    'every this many rounds, down to 1 (IMA Table 3: 20). 0 = off; needs '
    '--client_epochs >= 2.',
)
flags.DEFINE_integer(
    'client_batch_size', _DEFAULTS.client_batch_size, 'Local batch size.'
)
flags.DEFINE_integer(
    'client_max_elements',
    _DEFAULTS.client_max_elements,
    'At most this many examples per sampled client and round, the first '
    "ones after the shuffle and the epochs (TFF's ClientSpec.max_elements, "
    'for StackOverflow-style users with long histories); 0: all.',
)
flags.DEFINE_integer(
    'client_shuffle_buffer',
    _DEFAULTS.client_shuffle_buffer,
    "The clients' shuffle buffer (TFF's ClientSpec.shuffle_buffer_size); "
    "unset: the task's default (1000; TFF's own for stackoverflow); 1: no "
    'shuffle.',
)
flags.DEFINE_float(
    'client_learning_rate',
    _DEFAULTS.client_learning_rate,
    'Client SGD learning rate; '
    + _task_defaults_help('client_learning_rate')
    + '.',
)
flags.DEFINE_float(
    'client_momentum',
    _DEFAULTS.client_momentum,
    'Client SGD momentum in [0, 1) (TFF SGDM, reset each round; IMA '
    f'uses 0.9); {", ".join(config_lib.CLIENT_OPTIMIZER_ALGORITHMS)}.',
)
flags.DEFINE_float(
    'client_weight_decay',
    _DEFAULTS.client_weight_decay,
    'Client weight decay wd >= 0: every client step adds wd * w to the '
    "gradient before its optimizer, as PyTorch's SGD weight_decay (the IMA "
    f'authors use 0.001); {", ".join(config_lib.WEIGHT_DECAY_ALGORITHMS)}.',
)
flags.DEFINE_enum(
    'client_sharpness',
    _DEFAULTS.client_sharpness,
    list(config_lib.CLIENT_SHARPNESS),
    'Sharpness-aware client steps: sam (FedSAM) or asam (FedASAM, '
    'Caldarola et al. 2022): each step takes the gradient at w + e, e the '
    'ascent step of radius --sam_rho; none: plain steps. With '
    f'{", ".join(config_lib.WEIGHT_DECAY_ALGORITHMS)}.',
)
flags.DEFINE_float(
    'sam_rho',
    _DEFAULTS.sam_rho,
    "SAM's radius rho > 0, required with --client_sharpness (IMA Table 5's "
    'FedASAM: 0.2; SAM: 0.05).',
)
flags.DEFINE_float(
    'sam_eta',
    _DEFAULTS.sam_eta,
    "ASAM's eta >= 0 in T_w = |w| + eta (--client_sharpness=asam; IMA "
    "Table 5's FedASAM: 0.05).",
)
flags.DEFINE_float(
    'server_learning_rate',
    _DEFAULTS.server_learning_rate,
    'Server learning rate; '
    + _task_defaults_help('server_learning_rate')
    + f'; {_listed(_AS_FEDAVG, "and")} as fedavg.',
)
flags.DEFINE_float(
    'server_epsilon',
    _DEFAULTS.server_epsilon,
    f'{"/".join(config_lib.ADAPTIVE_SERVER_ALGORITHMS)}: the adaptivity '
    'epsilon (tau in Reddi et al. 2021); '
    "unset: the task's default: classification TFF's (Adam 1e-7, Yogi 1e-3); "
    'next word (stackoverflow, text) 1e-5; next character 1e-3.',
)
flags.DEFINE_integer(
    'seed', _DEFAULTS.seed, 'Seed (partition, sampling, ' 'model init).'
)
