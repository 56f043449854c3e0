"""The learning rates a run takes where its flags leave them unset.

`--client_learning_rate` and `--server_learning_rate` are unset (None in
`ExperimentConfig`) unless given; `with_task_defaults` fills them in by what
the task predicts (`prediction_kind`) and by the algorithm's server optimizer
(`SERVER_OPTIMIZERS`), before the run records its flags, so `run_config.json`
holds the numbers trained with. A flag the user passes is never changed.

Classification keeps this package's client SGD 0.05 and server 1.0 (the
numbers of runs from before the table are unchanged) and TFF's adaptivity
epsilons. Next word and next character take the tuned rates and epsilons
(`--server_epsilon`, tau) of Reddi et al., "Adaptive Federated Optimization"
(ICLR 2021, arXiv:2003.00295; google-research/federated,
`optimization/docs/hyperparameters.md`) for their Stack Overflow next-word
and Shakespeare tasks: `LEARNING_RATES` and `EPSILONS`, tabulated in
docs/data.md, "Learning rates of the recurrent tasks". Algorithms whose
server takes a plain SGD step take FedAvg's server rate.
"""

from typing import Any, Optional

import attrs

from tff_fedwin import choices
from tff_fedwin.experiments import algorithm_flags

CLASSIFICATION = 'classification'
NEXT_WORD = 'next_word'
NEXT_CHAR = 'next_char'
PREDICTION_KINDS = (CLASSIFICATION, NEXT_WORD, NEXT_CHAR)

# --algorithm -> the optimizer its server steps with
# (`algorithm_parts.server_optimizer`).
SERVER_OPTIMIZERS = {
    'fedavg': 'sgd',
    'fedprox': 'sgd',
    'fednova': 'sgd',
    'scaffold': 'sgd',
    'feddyn': 'sgd',
    'adabest': 'sgd',
    'fedcm': 'sgd',
    'fedacg': 'sgd',
    'mime': 'sgd',
    'fedgma': 'sgd',
    'fedfa': 'sgd',
    'mime_lite': 'sgd',
    'fedavgm': 'sgdm',
    'fedadam': 'adam',
    'fedyogi': 'yogi',
}

# kind -> (client SGD rate, {server optimizer: server rate}), docs/data.md.
LEARNING_RATES = {
    CLASSIFICATION: (0.05, dict(sgd=1.0, sgdm=1.0, adam=1.0, yogi=1.0)),
    NEXT_WORD: (10**-0.5, dict(sgd=1.0, sgdm=1.0, adam=0.01, yogi=0.01)),
    NEXT_CHAR: (1.0, dict(sgd=1.0, sgdm=10**-0.5, adam=0.01, yogi=0.01)),
}

# kind -> FedAdam's and FedYogi's epsilon (docs/data.md); None: TFF's.
EPSILONS = {CLASSIFICATION: None, NEXT_WORD: 1e-5, NEXT_CHAR: 1e-3}


def prediction_kind(config: Any, leaf_kind: Optional[str] = None) -> str:
  """What `config`'s task predicts: one of `PREDICTION_KINDS`.

  Args:
    config: An `ExperimentConfig`.
    leaf_kind: With `--task=leaf --leaf_kind=auto`, the kind the data were
      recognized as (`choices.LEAF_DATA_KINDS`); None: `config.leaf_kind`.
  """
  if config.task == 'text':
    return NEXT_CHAR if config.text_level == 'char' else NEXT_WORD
  if config.task == 'stackoverflow':
    return NEXT_WORD
  if config.task == 'shakespeare':
    return NEXT_CHAR
  if config.task == 'leaf':
    kind = config.leaf_kind if leaf_kind is None else leaf_kind
    if kind not in choices.LEAF_DATA_KINDS:
      raise ValueError(
          f'`leaf_kind` must be one of {choices.LEAF_DATA_KINDS} with '
          f'--leaf_kind=auto; got {kind!r}.'
      )
    if kind == 'reddit':
      return NEXT_WORD
    return NEXT_CHAR if kind == 'shakespeare' else CLASSIFICATION
  return CLASSIFICATION


def default_learning_rates(kind: str, algorithm: str) -> tuple[float, float]:
  """(client, server) learning rate of prediction `kind` and `algorithm`."""
  client, server = LEARNING_RATES[kind]
  return client, server[SERVER_OPTIMIZERS[algorithm]]


def with_task_defaults(config: Any, leaf_kind: Optional[str] = None) -> Any:
  """`config` with its unset learning rates (and epsilon) set.

  `server_epsilon` is set only for FedAdam and FedYogi on a recurrent task
  (`EPSILONS`).

  Args:
    config: An `ExperimentConfig` that passed `validate_config`.
    leaf_kind: As for `prediction_kind`; needed only for an unset rate of
      `--task=leaf --leaf_kind=auto`.

  Returns:
    `config` itself when nothing is unset, else a copy with the defaults.
  """
  epsilon_set = (
      config.server_epsilon is not None
      or config.algorithm not in algorithm_flags.ADAPTIVE_SERVER_ALGORITHMS
  )
  if (
      config.client_learning_rate is not None
      and config.server_learning_rate is not None
      and epsilon_set
  ):
    return config
  kind = prediction_kind(config, leaf_kind)
  client, server = default_learning_rates(kind, config.algorithm)
  return attrs.evolve(
      config,
      server_epsilon=(config.server_epsilon if epsilon_set else EPSILONS[kind]),
      client_learning_rate=(
          client
          if config.client_learning_rate is None
          else config.client_learning_rate
      ),
      server_learning_rate=(
          server
          if config.server_learning_rate is None
          else config.server_learning_rate
      ),
  )


def with_defaults_of_task(config: Any, task: Any) -> Any:
  """`with_task_defaults` for the built `task` (a `tasks.registry.Task`),
  whose `data_kind` is the recognized kind of `--task=leaf
  --leaf_kind=auto`."""
  leaf_kind = task.data_kind if config.task == 'leaf' else None
  return with_task_defaults(config, leaf_kind)
