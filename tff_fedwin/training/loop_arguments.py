"""`run_training`'s keyword arguments and their checks.

`check_arguments` raises a one-line ValueError naming the first bad argument,
before any file is written or TFF computation runs (docs/design.md sec. 5).
"""

from collections.abc import Callable
import os
from typing import Any, NamedTuple, Optional

import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.training import client_state_stores
from tff_fedwin.training import metrics as metrics_lib
from tff_fedwin.training import outputs
from tff_fedwin.training import runner as runner_lib
from tff_fedwin.training import sampling


class Arguments(NamedTuple):
  """`run_training`'s keyword arguments."""

  train_client_data: tff.simulation.datasets.ClientData
  preprocess_fn: sampling.PreprocessFn
  clients_per_round: int
  total_rounds: int
  seed: int
  evaluate_fn: metrics_lib.EvaluateFn
  rounds_per_eval: int
  rounds_per_checkpoint: int
  output_dir: str
  experiment_name: str
  summary_last_n: int
  client_states: str
  client_states_dir: Optional[str]
  client_epochs_fn: Optional[Callable[[int], int]] = None


def check_arguments(runner: Any, args: Arguments) -> Arguments:
  """Raises ValueError naming the first bad argument; `args` with ints."""
  runner_lib.check_runner(runner)
  if not isinstance(args.train_client_data, tff.simulation.datasets.ClientData):
    raise ValueError(
        '`train_client_data` must be a tff.simulation.datasets.ClientData, got '
        f'{type(args.train_client_data).__name__}.'
    )
  for name in ('preprocess_fn', 'evaluate_fn'):
    if not callable(getattr(args, name)):
      raise ValueError(f'`{name}` must be callable.')
  if args.client_epochs_fn is not None and not (
      callable(args.client_epochs_fn)
      and sampling.takes_epochs(args.preprocess_fn)
  ):
    raise ValueError(
        '`client_epochs_fn` must be None or callable, with a `preprocess_fn` '
        "that takes `shuffle_seed` and `epochs` keywords (a task's "
        '`batching_fn`).'
    )
  num_clients = len(args.train_client_data.client_ids)
  clients_per_round = checks.check_int(
      'clients_per_round', args.clients_per_round, minimum=1
  )
  if clients_per_round > num_clients:
    raise ValueError(
        f'`clients_per_round` ({clients_per_round}) exceeds the number of '
        f'clients in `train_client_data` ({num_clients}).'
    )
  ints = {
      name: checks.check_int(name, getattr(args, name), minimum=1)
      for name in (
          'total_rounds',
          'rounds_per_eval',
          'rounds_per_checkpoint',
          'summary_last_n',
      )
  }
  seed = checks.check_int('seed', args.seed, minimum=0)
  checks.check_choice(
      'client_states', args.client_states, client_state_stores.KINDS
  )
  if args.client_states_dir is not None and (
      not isinstance(args.client_states_dir, (str, os.PathLike))
      or not os.fspath(args.client_states_dir)
  ):
    raise ValueError(
        '`client_states_dir` must be None or a non-empty path, got '
        f'{args.client_states_dir!r}.'
    )
  if not isinstance(args.output_dir, (str, os.PathLike)) or not os.fspath(
      args.output_dir
  ):
    raise ValueError(
        f'`output_dir` must be a non-empty path, got {args.output_dir!r}.'
    )
  if not outputs.is_directory_name(args.experiment_name):
    raise ValueError(
        '`experiment_name` must be a non-empty directory name without path '
        f'separators, got {args.experiment_name!r}.'
    )
  return args._replace(clients_per_round=clients_per_round, seed=seed, **ints)
