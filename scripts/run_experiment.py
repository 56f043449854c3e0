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

from tff_fedwin import log_levels

log_levels.quiet_native_logs(sys.argv)  # Before TensorFlow is imported.

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags

# Without TensorFlow: the flags and their checks (`validate_config`), then the
# data files (`read_data_files`) come first, so a bad flag or file is refused in
# about a second; `experiments.run_experiment` imports TensorFlow and TFF on
# first use.
from tff_fedwin import choices
from tff_fedwin import errors
from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import data_flags
from tff_fedwin.experiments import task_defaults

# pylint: enable=g-import-not-at-top,wrong-import-position

_DEFAULTS = experiments.ExperimentConfig()
_listed = config_lib.listed
# The algorithms whose server steps as FedAvg's (plain SGD): their server
# learning rate is FedAvg's.
_AS_FEDAVG = tuple(
    a
    for a in experiments.ALGORITHMS
    if a != 'fedavg' and task_defaults.SERVER_OPTIMIZERS[a] == 'sgd'
)


# --leaf_kind: what each kind's data are (one per `choices.LEAF_KINDS`).
LEAF_KIND_HELP = {
    'femnist': '784-pixel rows, 62 classes',
    'shakespeare': '80 characters -> the next',
    'synthetic': "feature vectors, LEAF's logistic regression",
    'sent140': "tweets, LEAF's stacked LSTM",
    'celeba': "image file names, LEAF's CNN",
    'reddit': "comment windows of 10 tokens -> the next, LEAF's LSTM",
    'auto': 'from the data',
}


def _model_help() -> str:
  """`--model`'s help: its tasks and their defaults, from `MODEL_TASKS`."""
  dropout = [
      t for t in data_flags.MODEL_TASKS if t in choices.DROPOUT_DEFAULT_TASKS
  ]
  others = [t for t in data_flags.MODEL_TASKS if t not in dropout]
  defaults = [f'the small CNN for {_listed(others, "and")}'] if others else []
  if dropout:
    defaults.append(
        f'{choices.DROPOUT_MODELS[0]} for {_listed(dropout, "and")}'
    )
  return (
      f'Image tasks ({_listed(data_flags.MODEL_TASKS, "and")}; leaf: its '
      f"FEMNIST-style rows): the model; auto: {', '.join(defaults)}."
  )


def _eval_split_help() -> str:
  """`--eval_split`'s help, from `data_flags.VALIDATION_SPLITS`."""
  splits = '; '.join(
      f'{task}: {split}' for task, split in data_flags.VALIDATION_SPLITS.items()
  )
  return (
      'What the run evaluates on: the test set, or the validation split, for '
      f'tuning without the test set ({splits}).'
  )


# Task and data.
flags.DEFINE_enum(
    'task', _DEFAULTS.task, list(experiments.TASKS), 'Which task to train.'
)
flags.DEFINE_string(
    'data_npz',
    None,
    'With --task=npz: .npz with x_train, ' 'y_train, x_test, y_test.',
)
flags.DEFINE_string(
    'data_dir',
    None,
    'With --task=leaf: a LEAF data directory (train/*.json, test/*.json, '
    "as LEAF's preprocess.sh writes them); one client per user.",
)
flags.DEFINE_enum(
    'leaf_kind',
    _DEFAULTS.leaf_kind,
    list(experiments.LEAF_KINDS),
    'leaf: '
    + ', '.join(f'{kind} ({what})' for kind, what in LEAF_KIND_HELP.items())
    + '.',
)
flags.DEFINE_string(
    'leaf_images_dir',
    None,
    "leaf, CelebA-style data: the directory of the images x names (LEAF's "
    'data/celeba/data/raw/img_align_celeba).',
)
flags.DEFINE_string(
    'leaf_vocab_file',
    None,
    "leaf, Sent140-style data: the vocabulary, LEAF's embs.json or a "
    "file of one word per line (GloVe's .txt); unset: the training tweets' "
    '--vocab_size most frequent words.',
)
flags.DEFINE_string(
    'data_jsonl',
    None,
    'With --task=text: a .jsonl (one {"client_id", "text", "split"?} per '
    'line) or .csv (header client_id,text[,split]) file; one client per id.',
)
flags.DEFINE_enum(
    'text_level',
    _DEFAULTS.text_level,
    list(experiments.TEXT_LEVELS),
    'text: next-word (word) or next-character (char) prediction.',
)
flags.DEFINE_integer(
    'vocab_size',
    _DEFAULTS.vocab_size,
    f'{_listed(data_flags.VOCAB_SIZE_TASKS, "and")} (text: word level; leaf: '
    'Sent140-style data): the most frequent training words kept; others are '
    'out-of-vocabulary.',
)
flags.DEFINE_integer(
    'sequence_length',
    _DEFAULTS.sequence_length,
    'text: tokens per example (longer texts are cut, shorter padded).',
)
flags.DEFINE_float(
    'test_fraction',
    _DEFAULTS.test_fraction,
    "text without a split field: the last fraction of each client's "
    'examples that go to the test set, in [0, 1).',
)
flags.DEFINE_enum(
    'text_tokenizer',
    _DEFAULTS.text_tokenizer,
    list(experiments.TEXT_TOKENIZERS),
    'text (word level): words: lowercased, punctuation marks as tokens of '
    "their own (raw text; StackOverflow's own preprocessing); whitespace: "
    'split on whitespace only (text that is already tokenized).',
)
flags.DEFINE_enum(
    'text_model',
    _DEFAULTS.text_model,
    list(experiments.TEXT_MODELS),
    "text: the LSTM's size; tff: TFF's StackOverflow model (embedding 96, "
    'LSTM 670, 4.05M parameters at 10,000 words), small: embedding 32, LSTM '
    '128 (0.74M).',
)
flags.DEFINE_integer(
    'stackoverflow_test_batches',
    _DEFAULTS.stackoverflow_test_batches,
    "stackoverflow: the first batches of TFF's test set evaluated (the whole "
    'set takes hours on a CPU); 0: all of it.',
)
flags.DEFINE_enum(
    'model',
    _DEFAULTS.model,
    list(experiments.MODELS),
    _model_help(),
)
flags.DEFINE_integer(
    'num_classes',
    _DEFAULTS.num_classes,
    f"{_listed(data_flags.NUM_CLASSES_TASKS, 'and')} (leaf: its image and "
    "vector rows): the classifier's outputs; 0: "
    '1 + the largest label of the train and test splits (set it when the '
    'data lack the highest classes).',
)
flags.DEFINE_bool(
    'scale_integer_features',
    _DEFAULTS.scale_integer_features,
    'npz: integer features (e.g. uint8 pixels) scaled to [0, 1] '
    '(/255, or /65535 for 16-bit); off: cast unscaled.',
)
flags.DEFINE_integer(
    'max_npz_bytes',
    _DEFAULTS.max_npz_bytes,
    'npz: the most bytes the four arrays may decompress to, checked in the '
    "archive's headers before any is read (a zip bomb is refused); 0: "
    f'{choices.NPZ_MEMORY_FRACTION:g} of the memory available at the start.',
)
flags.DEFINE_enum(
    'eval_split',
    _DEFAULTS.eval_split,
    list(experiments.EVAL_SPLITS),
    _eval_split_help(),
)
flags.DEFINE_bool(
    'eval_per_client',
    _DEFAULTS.eval_per_client,
    f'{", ".join(choices.TASKS_WITH_TEST_CLIENTS)}: also evaluate each test '
    'client at every eval round, as LEAF reports: rows in '
    'per_client_metrics.csv, their spread in metrics.csv (docs/design.md '
    'sec. 5.7).',
)
flags.DEFINE_string(
    'cache_dir',
    None,
    'emnist/stackoverflow: directory with '
    'the extracted TFF sqlite files (no download).',
)
flags.DEFINE_bool(
    'use_synthetic_data',
    False,
    'emnist/stackoverflow: TFF ' 'synthetic clients (tests; no download).',
)
flags.DEFINE_integer(
    'num_clients',
    _DEFAULTS.num_clients,
    f'{"/".join(data_flags.PARTITIONED_TASKS)}: number of clients.',
)
flags.DEFINE_float(
    'dirichlet_alpha',
    _DEFAULTS.dirichlet_alpha,
    f'{"/".join(data_flags.PARTITIONED_TASKS)}: Dirichlet label skew; 0 = one '
    'class per client.',
)
# Algorithm.
flags.DEFINE_enum(
    'algorithm',
    _DEFAULTS.algorithm,
    list(experiments.ALGORITHMS),
    'Federated algorithm.',
)
flags.DEFINE_enum(
    'client_loss',
    _DEFAULTS.client_loss,
    list(experiments.CLIENT_LOSSES),
    'ce or WSM re-weighted CE.',
)
flags.DEFINE_float(
    'proximal_strength',
    _DEFAULTS.proximal_strength,
    'FedProx mu (--algorithm=fedprox).',
)
flags.DEFINE_float(
    'feddyn_alpha',
    _DEFAULTS.feddyn_alpha,
    'FedDyn alpha > 0, the weight of its dynamic regularizer; required with '
    '--algorithm=feddyn (WiMA tunes it in {0.01, 0.001}).',
)
flags.DEFINE_float(
    'adabest_mu',
    _DEFAULTS.adabest_mu,
    'AdaBest mu > 0, the weight of the new drift in h_i; required with '
    '--algorithm=adabest (WiMA tunes it in {0.01, 0.02}).',
)
flags.DEFINE_float(
    'adabest_beta',
    _DEFAULTS.adabest_beta,
    "AdaBest beta in [0, 1), the server's bias correction; required with "
    '--algorithm=adabest (WiMA: {0.5, 0.6, 0.7, 0.8, 0.9, 0.95}).',
)
flags.DEFINE_float(
    'fedcm_alpha',
    _DEFAULTS.fedcm_alpha,
    "FedCM alpha in (0, 1], the weight of a client's own gradient against "
    'the global estimate; required with --algorithm=fedcm (WiMA tunes it in '
    '{0.05, 0.1, 0.5}).',
)
flags.DEFINE_float(
    'fedacg_lambda',
    _DEFAULTS.fedacg_lambda,
    "FedACG lambda in [0, 1), the server momentum and the clients' "
    'lookahead; required with --algorithm=fedacg (WiMA: {0.8, 0.85, 0.9}).',
)
flags.DEFINE_float(
    'fedacg_beta',
    _DEFAULTS.fedacg_beta,
    'FedACG beta >= 0, its proximal term (beta/2)||w - lookahead||^2; '
    'required with --algorithm=fedacg (WiMA: {0.01, 0.001}).',
)
flags.DEFINE_float(
    'mime_beta',
    _DEFAULTS.mime_beta,
    "MIME's momentum beta in [0, 1), of the server optimizer state every "
    'local step uses; 0 is MIME with SGD; required with --algorithm=mime '
    '(WiMA: 0 for MIME SGD, 0.9 for MIME SGDm).',
)
flags.DEFINE_float(
    'fedgma_threshold',
    _DEFAULTS.fedgma_threshold,
    "FedGMA's mask threshold tau in [0, 1]: a coordinate of the mean update "
    "whose clients' sign agreement is above tau counts fully, the others "
    'scaled by their agreement; required with --algorithm=fedgma (IMA: 0.8).',
)
flags.DEFINE_float(
    'fedfa_lambda',
    _DEFAULTS.fedfa_lambda,
    "FedFA's anchor-loss weight lambda >= 0; required with --algorithm=fedfa "
    "(the IMA authors' code: 0.1).",
)
flags.DEFINE_float(
    'fedfa_momentum',
    _DEFAULTS.fedfa_momentum,
    "FedFA's anchor momentum m in [0, 1]; required with --algorithm=fedfa "
    "(the IMA authors' code: 0.5; IMA Table 5: 0.9).",
)
flags.DEFINE_integer(
    'fedfa_calibration_start_round',
    _DEFAULTS.fedfa_calibration_start_round,
    'FedFA calibrates the classifier on the anchors in the rounds t >= this '
    "(>= 1); required with --algorithm=fedfa (the IMA authors' code: "
    'floor(R / 4) + 2 of R rounds).',
)
# Window.
flags.DEFINE_integer(
    'window_size',
    _DEFAULTS.window_size,
    'W >= 1 models in the window; 0 = no window.',
)
flags.DEFINE_enum(
    'window_mode',
    _DEFAULTS.window_mode,
    list(experiments.WINDOW_MODES),
    'evaluate (WiMA) or broadcast (IMA).',
)
flags.DEFINE_integer(
    'window_start_round',
    _DEFAULTS.window_start_round,
    'Window model active from max(W, this round).',
)
flags.DEFINE_integer(
    'window_read_every',
    _DEFAULTS.window_read_every,
    'E: window model needed every E rounds (ceil(W/E) '
    'slots); set --rounds_per_eval to a multiple of it.',
)
flags.DEFINE_enum(
    'window_location',
    _DEFAULTS.window_location,
    list(experiments.WINDOW_LOCATIONS),
    'state: the window in the process state; program: kept by the '
    'round loop, its W models in files next to the checkpoints (state '
    'of one model, O(model) per round); auto: program above 32 MiB '
    'of window slots.',
)
flags.DEFINE_string(
    'window_sizes',
    _DEFAULTS.window_sizes,
    'More window sizes on the same trajectory, e.g. 5,50,200 besides '
    '--window_size=100: each evaluated (window_<W>/ columns), kept by the '
    'program, one set of round files for all.',
)
flags.DEFINE_enum(
    'window_part',
    _DEFAULTS.window_part,
    list(experiments.WINDOW_PARTS),
    "Which part of the evaluated window model is the window's (WiMA Table "
    '5): all; classifier, the last layer only; features, all but the last '
    "layer. The rest is the round's global model. Evaluate mode only.",
)
flags.DEFINE_enum(
    'client_lr_schedule',
    _DEFAULTS.client_lr_schedule,
    list(experiments.LR_SCHEDULES),
    "constant; decay: 0.99^t (IMA's baselines); or one of IMA's decay "
    'schemes, 0.99^t before --window_start_round and from it on: ima, 0.97 '
    'per round; ima_constant, --client_lr_low; ima_cyclic, from the rate at '
    '--window_start_round down to --client_lr_low over every '
    "--client_lr_cycle rounds; or swa_cyclic, FedSWA's cyclic rate from "
    '--swa_start_round on: (1 - a) lr + a --client_lr_low, a = ((t - 1) mod '
    '--swa_cycle + 1) / --swa_cycle. With '
    f'{", ".join(config_lib.CLIENT_SCHEDULE_ALGORITHMS)}.',
)
flags.DEFINE_float(
    'client_lr_low',
    _DEFAULTS.client_lr_low,
    'The client rate of --client_lr_schedule=ima_constant and the bottom '
    "of each cycle of ima_cyclic (IMA Table 3's 5e-5) and of swa_cyclic "
    "(FedSWA's --swa-lr, 1e-4 in its code).",
)
flags.DEFINE_integer(
    'client_lr_cycle',
    _DEFAULTS.client_lr_cycle,
    'Rounds per cycle of --client_lr_schedule=ima_cyclic (>= 2).',
)
flags.DEFINE_integer(
    'swa_start_round',
    _DEFAULTS.swa_start_round,
    "Server-side SWA (FedSWA, WiMA's comparison) from this round t_s on: the "
    'global models of rounds t_s + k --swa_cycle (k >= 1) are averaged and '
    'evaluated as the window/ model; the clients keep the global model. '
    "t_s = the authors' swa_start + 1 (their default: int(0.75 "
    '--total_rounds) + 1). 0 = off; not with --window_size.',
)
flags.DEFINE_integer(
    'swa_cycle',
    _DEFAULTS.swa_cycle,
    'c >= 1: rounds between two models SWA averages, and the cycle of '
    "--client_lr_schedule=swa_cyclic (>= 2 there); FedSWA's --swa-c.",
)
# Training.
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
    + task_defaults.help_text('client_learning_rate')
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
    + task_defaults.help_text('server_learning_rate')
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
# Outputs.
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
