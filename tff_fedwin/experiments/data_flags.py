"""The data flags of an experiment: which task reads which file, and ranges.

Each task reads its data from one flag (`--data_npz` for `npz`, `--data_dir`
for `leaf`, `--data_jsonl` for `text`), and a flag that only one kind of task
reads is refused with any other (nothing is silently ignored). Checked
before any TFF work; every message names the flag and what is allowed. The
files' contents are checked when the task is built (`tasks.registry`), also
before any worker starts.
"""

from typing import Any

from tff_fedwin import checks

# Each task's data flag (the file or directory it reads).
DATA_FLAGS = {'npz': 'data_npz', 'leaf': 'data_dir', 'text': 'data_jsonl'}
# Flags read by one task only, with their defaults: a non-default value with
# another task is refused.
TEXT_FLAGS = (
    'text_level',
    'text_tokenizer',
    'sequence_length',
    'test_fraction',
    'text_model',
)
STACKOVERFLOW_FLAGS = ('stackoverflow_test_batches',)
LEAF_FLAGS = ('leaf_kind', 'leaf_images_dir', 'leaf_vocab_file')
# The tasks whose models `--model` chooses (image classification).
MODEL_TASKS = ('mnist', 'npz', 'leaf')
TEXT_SUFFIXES = ('.jsonl', '.csv')


def check_data_flags(config: Any, defaults: Any) -> None:
  """Raises ValueError naming the flag for data flags that do not fit.

  Args:
    config: An `ExperimentConfig`.
    defaults: `ExperimentConfig()`, whose values count as "not given".
  """
  for task, flag in DATA_FLAGS.items():
    value = getattr(config, flag)
    if config.task == task and not value:
      raise ValueError(f'--{flag} is required with --task={task}.')
    if value and config.task != task:
      raise ValueError(f'--{flag} is only used with --task={task}.')
  for flag in LEAF_FLAGS:
    if getattr(config, flag) != getattr(defaults, flag) and (
        config.task != 'leaf'
    ):
      raise ValueError(f'--{flag} is only used with --task=leaf.')
  if config.vocab_size != defaults.vocab_size:
    if config.task not in ('text', 'leaf'):
      raise ValueError(
          '--vocab_size is only used with --task=text and --task=leaf '
          '(Sent140-style data).'
      )
    if config.leaf_vocab_file:
      raise ValueError(
          '--vocab_size does not apply with --leaf_vocab_file (the file is '
          'the vocabulary).'
      )
    checks.check_int('--vocab_size', config.vocab_size, minimum=1)
  for flag in TEXT_FLAGS:
    if getattr(config, flag) != getattr(defaults, flag) and (
        config.task != 'text'
    ):
      raise ValueError(f'--{flag} is only used with --task=text.')
  for flag in STACKOVERFLOW_FLAGS:
    if getattr(config, flag) != getattr(defaults, flag) and (
        config.task != 'stackoverflow'
    ):
      raise ValueError(f'--{flag} is only used with --task=stackoverflow.')
  if config.model != defaults.model and config.task not in MODEL_TASKS:
    raise ValueError(
        f'--model chooses the image model of --task='
        f'{", ".join(MODEL_TASKS)}; --task={config.task} has its own model.'
    )
  if config.task == 'text':
    _check_text(config, defaults)


def _check_text(config: Any, defaults: Any) -> None:
  """--data_jsonl's suffix, --vocab_size, --sequence_length, --test_fraction."""
  if not config.data_jsonl.lower().endswith(TEXT_SUFFIXES):
    raise ValueError(
        f'--data_jsonl must name a {" or ".join(TEXT_SUFFIXES)} file; got '
        f'{config.data_jsonl!r}.'
    )
  checks.check_int('--vocab_size', config.vocab_size, minimum=1)
  checks.check_int('--sequence_length', config.sequence_length, minimum=1)
  fraction = checks.check_number('--test_fraction', config.test_fraction)
  if not 0 <= fraction < 1:
    raise ValueError(
        f'--test_fraction must be in [0, 1); got {config.test_fraction!r}.'
    )
  if config.text_level == 'char' and config.vocab_size != defaults.vocab_size:
    raise ValueError(
        '--vocab_size is for --text_level=word; the character vocabulary is '
        "every character of the training split's texts."
    )
  if config.text_level == 'char' and (
      config.text_tokenizer != defaults.text_tokenizer
  ):
    raise ValueError(
        '--text_tokenizer is for --text_level=word; at the character level '
        'every character is a token.'
    )
