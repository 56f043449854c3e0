"""One experiment from plain arguments: task, algorithm, window, round loop.

`ExperimentConfig` holds what the binaries' flags say (scripts/run_experiment.py
turns flags into it; library code never reads FLAGS). `validate_config` checks
everything that can be checked before any TFF work and names the flag in every
message; `run_experiment` builds the task and the process and runs
`tff_fedwin.training.run_training` on managed TFF workers.
"""

import contextlib
import re
from typing import Any, Optional

import attrs
import tensorflow_federated as tff

from tff_fedwin import runtime
from tff_fedwin.aggregators import window as window_lib
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import scaffold
from tff_fedwin.tasks import registry
from tff_fedwin.training import client_states
from tff_fedwin.training import divergence
from tff_fedwin.training import loop

ALGORITHMS = ('fedavg', 'fedavgm', 'fedadam', 'fedyogi', 'fedprox',
              'mime_lite', 'scaffold')
CLIENT_LOSSES = ('ce', 'wsm')
WINDOW_MODES = window_lib.MODES
LR_SCHEDULES = ('constant', 'ima')
WORKER_BINDS = ('loopback', 'all')
SERVER_MOMENTUM = 0.9  # FedAvgM (Hsu et al. 2019).


class InputDataError(ValueError):
  """The task's data cannot be used as configured.

  The message names the file and array, or the flag that does not fit the data.
  """


# Errors a user can act on from their message alone; scripts print them as one
# line (see scripts/run_experiment.py).
USER_ERRORS = (InputDataError, registry.DataUnavailableError,
               runtime.WorkerConfinementError,
               divergence.TrainingDivergedError)


@attrs.frozen
class ExperimentConfig:
  """Everything an experiment run depends on (one field per flag)."""

  task: str = 'mnist'
  data_npz: Optional[str] = None
  scale_integer_features: bool = True
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
  client_lr_schedule: str = 'constant'
  total_rounds: int = 50
  clients_per_round: int = 10
  client_epochs: int = 1
  client_batch_size: int = 20
  client_learning_rate: float = 0.05
  server_learning_rate: float = 1.0
  seed: int = 0
  rounds_per_eval: int = 5
  rounds_per_checkpoint: int = 10
  summary_last_n: int = 5
  root_output_dir: str = '/tmp/tff_fedwin'
  experiment_name: str = 'experiment'
  workers: str = ''
  worker_bind: str = 'loopback'


def _choice(flag: str, value: Any, allowed: tuple[str, ...]) -> None:
  if value not in allowed:
    raise ValueError(f'--{flag} must be one of {", ".join(allowed)}; '
                     f'got {value!r}.')


def _at_least(flag: str, value: Any, minimum: float, kind=int) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or (
      kind is int and not isinstance(value, int)) or value < minimum:
    raise ValueError(f'--{flag} must be {"an integer" if kind is int else "a number"}'
                     f' >= {minimum}; got {value!r}.')


def _positive(flag: str, value: Any) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or (
      not value > 0):
    raise ValueError(f'--{flag} must be > 0; got {value!r}.')


_HOST = re.compile(r'^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)$')
_MAX_PORT = 65535


def parse_workers(workers: str) -> tuple[Optional[int], tuple[str, ...]]:
  """'' -> (None, ()); 'N' -> (N, ()); 'h:p,h:p' -> (None, addresses).

  A host is a name, an IPv4 address or a bracketed IPv6 address (`[::1]`); a
  port is 1..65535.
  """
  workers = workers.strip()
  if not workers:
    return None, ()
  allowed = ('empty, an integer >= 1 or a comma list of host:port with '
             f'ports 1-{_MAX_PORT}')
  if workers.isdigit():
    if int(workers) < 1:
      raise ValueError(f'--workers must be {allowed}; got {workers!r}.')
    return int(workers), ()
  addresses = tuple(a.strip() for a in workers.split(','))
  for address in addresses:
    host, _, port = address.rpartition(':')
    if (not _HOST.match(host) or not port.isdigit()
        or not 1 <= int(port) <= _MAX_PORT):
      raise ValueError(f'--workers must be {allowed}; got {address!r} in '
                       f'{workers!r}.')
  return None, addresses


def validate_config(config: ExperimentConfig) -> None:
  """Raises ValueError naming the flag for any bad or inconsistent value."""
  _choice('task', config.task, registry.TASKS)
  _choice('algorithm', config.algorithm, ALGORITHMS)
  _choice('client_loss', config.client_loss, CLIENT_LOSSES)
  _choice('window_mode', config.window_mode, WINDOW_MODES)
  _choice('client_lr_schedule', config.client_lr_schedule, LR_SCHEDULES)
  _choice('worker_bind', config.worker_bind, WORKER_BINDS)
  if not loop.is_directory_name(config.experiment_name):
    raise ValueError(
        '--experiment_name must be one directory name (no "/", not "." or '
        f'".."); got {config.experiment_name!r}.')
  if config.task == 'npz' and not config.data_npz:
    raise ValueError('--data_npz is required with --task=npz.')
  if config.data_npz and config.task != 'npz':
    raise ValueError('--data_npz is only used with --task=npz.')
  for flag in ('total_rounds', 'clients_per_round', 'client_epochs',
               'client_batch_size', 'rounds_per_eval', 'rounds_per_checkpoint',
               'num_clients', 'window_read_every', 'summary_last_n'):
    _at_least(flag, getattr(config, flag), 1)
  for flag in ('window_size', 'window_start_round', 'seed'):
    _at_least(flag, getattr(config, flag), 0)
  _at_least('dirichlet_alpha', config.dirichlet_alpha, 0, kind=float)
  _at_least('proximal_strength', config.proximal_strength, 0, kind=float)
  _positive('client_learning_rate', config.client_learning_rate)
  _positive('server_learning_rate', config.server_learning_rate)
  if config.window_size > config.total_rounds:
    raise ValueError(
        f'--window_size ({config.window_size}) must be <= --total_rounds '
        f'({config.total_rounds}): the window model is active from round '
        'max(W, --window_start_round) on, so it would never be used.')
  if config.window_start_round > config.total_rounds:
    raise ValueError(
        f'--window_start_round ({config.window_start_round}) must be <= '
        f'--total_rounds ({config.total_rounds}).')
  if config.task in ('mnist', 'npz') and (
      config.clients_per_round > config.num_clients):
    raise ValueError(
        f'--clients_per_round ({config.clients_per_round}) must be <= '
        f'--num_clients ({config.num_clients}).')
  if config.window_size == 0 and (config.window_mode != 'evaluate' or
                                  config.window_start_round or
                                  config.window_read_every != 1):
    raise ValueError('--window_mode, --window_start_round and '
                     '--window_read_every need --window_size >= 1.')
  if config.window_read_every > 1 and (
      config.rounds_per_eval % config.window_read_every or
      config.total_rounds % config.window_read_every):
    raise ValueError(
        f'--rounds_per_eval ({config.rounds_per_eval}) and --total_rounds '
        f'({config.total_rounds}) must be multiples of --window_read_every '
        f'({config.window_read_every}): the window model exists only at those '
        'rounds.')
  if config.algorithm == 'scaffold' and config.window_read_every != 1:
    raise ValueError('--window_read_every is not supported with '
                     '--algorithm=scaffold (its window keeps W slots).')
  if config.window_mode == 'broadcast' and config.window_read_every != 1:
    raise ValueError('--window_read_every must be 1 with '
                     '--window_mode=broadcast.')
  if config.client_loss == 'wsm' and (
      config.task not in registry.CLASSIFICATION_TASKS):
    raise ValueError(
        f'--client_loss=wsm needs one label per example: --task must be one '
        f'of {", ".join(registry.CLASSIFICATION_TASKS)}; got {config.task!r}.')
  if config.algorithm == 'mime_lite' and config.client_loss != 'ce':
    raise ValueError('--algorithm=mime_lite supports --client_loss=ce only.')
  if config.client_lr_schedule == 'ima' and config.algorithm in (
      'fedprox', 'mime_lite', 'scaffold'):
    raise ValueError(
        '--client_lr_schedule=ima is supported with --algorithm=fedavg, '
        f'fedavgm, fedadam or fedyogi; got {config.algorithm!r}.')
  if config.algorithm in ('fedprox', 'mime_lite') and config.window_size and (
      config.client_loss == 'ce' and config.server_learning_rate != 1.0):
    raise ValueError(
        f'--algorithm={config.algorithm} uses the window as TFF model '
        'aggregator, which is exact only with --server_learning_rate=1.0.')
  _, addresses = parse_workers(config.workers)
  if addresses and config.worker_bind != 'loopback':
    raise ValueError('--worker_bind applies to the workers this run starts; '
                     '--workers lists running ones.')


def _server_optimizer(config: ExperimentConfig):
  lr = config.server_learning_rate
  if config.algorithm == 'fedavgm':
    return tff.learning.optimizers.build_sgdm(lr, momentum=SERVER_MOMENTUM)
  if config.algorithm == 'fedadam':
    return tff.learning.optimizers.build_adam(lr)
  if config.algorithm == 'fedyogi':
    return tff.learning.optimizers.build_yogi(lr)
  return tff.learning.optimizers.build_sgdm(lr)


def build_runner(config: ExperimentConfig, task: registry.Task,
                 num_train_clients: int):
  """The process for `config.algorithm`, wrapped as a `loop` runner."""
  window_size = config.window_size or None
  client_optimizer = tff.learning.optimizers.build_sgdm(
      config.client_learning_rate)
  if config.algorithm == 'scaffold':
    process = scaffold.build_scaffold(
        task.model_fn, client_learning_rate=config.client_learning_rate,
        server_learning_rate=config.server_learning_rate,
        total_clients=num_train_clients, client_loss=config.client_loss,
        num_classes=task.num_classes if config.client_loss == 'wsm' else None,
        window_size=window_size, window_mode=config.window_mode,
        window_start_round=config.window_start_round)
    store = client_states.ClientStateStore(
        scaffold.initial_client_state(task.model_fn))
    return loop.ScaffoldRunner(process, store)
  if config.algorithm in ('fedprox', 'mime_lite') and (
      config.client_loss == 'ce'):
    aggregator = window_lib.WindowedModelAveragingFactory(
        window_size, mode=config.window_mode,
        start_round=config.window_start_round,
        read_every=config.window_read_every) if window_size else None
    if config.algorithm == 'fedprox':
      process = tff.learning.algorithms.build_weighted_fed_prox(
          task.model_fn, proximal_strength=config.proximal_strength,
          client_optimizer_fn=client_optimizer,
          server_optimizer_fn=_server_optimizer(config),
          model_aggregator=aggregator)
    else:
      process = tff.learning.algorithms.build_weighted_mime_lite(
          task.model_fn, base_optimizer=client_optimizer,
          server_optimizer=_server_optimizer(config),
          model_aggregator=aggregator)
    return loop.LearningProcessRunner(process)
  learning_rate_fn = None
  if config.client_lr_schedule == 'ima':
    learning_rate_fn = fed_win.ima_client_learning_rate_fn(
        config.client_learning_rate, config.window_start_round)
  process = fed_win.build_fed_win(
      task.model_fn, client_optimizer, _server_optimizer(config),
      window_size=window_size, window_mode=config.window_mode,
      window_start_round=config.window_start_round,
      window_read_every=config.window_read_every,
      client_learning_rate_fn=learning_rate_fn,
      client_loss=config.client_loss,
      num_classes=task.num_classes if config.client_loss == 'wsm' else None,
      proximal_strength=(config.proximal_strength
                         if config.algorithm == 'fedprox' else 0.0))
  return loop.LearningProcessRunner(process)


def execution_context(workers: str, worker_bind: str = 'loopback'):
  """A context manager for `--workers` (see `parse_workers`).

  Workers this run starts listen on loopback only unless `worker_bind` is
  `'all'` (then a warning says they serve every interface unauthenticated).
  """
  num_workers, addresses = parse_workers(workers)
  loopback_only = worker_bind == 'loopback'
  if num_workers is None and not addresses:
    return runtime.local_execution_context(loopback_only=loopback_only)
  if addresses:
    return runtime.multi_worker_execution_context(addresses=addresses)
  return runtime.multi_worker_execution_context(
      num_workers=num_workers, loopback_only=loopback_only)


def run_experiment(config: ExperimentConfig) -> dict[str, Any]:
  """Validates `config`, builds task and process, trains; returns the summary."""
  validate_config(config)
  try:
    task = registry.create_task(
        config.task, batch_size=config.client_batch_size,
        epochs=config.client_epochs, seed=config.seed,
        num_clients=config.num_clients,
        dirichlet_alpha=config.dirichlet_alpha, data_npz=config.data_npz,
        cache_dir=config.cache_dir,
        use_synthetic_data=config.use_synthetic_data,
        scale_integer_features=config.scale_integer_features)
  except ValueError as e:
    raise InputDataError(str(e)) from e
  except registry.DataUnavailableError as e:
    raise registry.DataUnavailableError(
        f'{e} (flags: --cache_dir, --use_synthetic_data)') from e
  num_train_clients = len(task.train_data.client_ids)
  if config.clients_per_round > num_train_clients:
    raise InputDataError(
        f'--clients_per_round ({config.clients_per_round}) must be <= the '
        f'number of training clients of --task={config.task} '
        f'({num_train_clients}).')
  with contextlib.ExitStack() as stack:
    stack.enter_context(
        execution_context(config.workers, config.worker_bind))
    runner = build_runner(config, task, num_train_clients)
    return loop.run_training(
        runner,
        train_client_data=task.train_data,
        preprocess_fn=task.preprocess_fn,
        clients_per_round=config.clients_per_round,
        total_rounds=config.total_rounds,
        seed=config.seed,
        evaluate_fn=task.build_evaluate_fn(),
        rounds_per_eval=config.rounds_per_eval,
        rounds_per_checkpoint=config.rounds_per_checkpoint,
        output_dir=config.root_output_dir,
        experiment_name=config.experiment_name,
        summary_last_n=config.summary_last_n,
    )
