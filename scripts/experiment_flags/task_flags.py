"""run_experiment.py's task and data flags: the task, its data and model."""

from absl import flags

from tff_fedwin import choices
from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import data_flags

_DEFAULTS = experiments.ExperimentConfig()
_listed = config_lib.listed


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
