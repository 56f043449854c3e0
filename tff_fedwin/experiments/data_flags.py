"""The data flags of an experiment: which task reads which file, and ranges.

Each task reads its data from one flag (`--data_npz` for `npz`, `--data_dir`
for `leaf`, `--data_jsonl` for `text`), and a flag that only one kind of task
reads is refused with any other (nothing is silently ignored). Checked
before any TFF work, every misfit reported, each naming the flag and what is
allowed; the task lists here are the ones the flags' help shows. The
files' contents are checked when the task is built (`tasks.registry`), also
before any worker starts.
"""

from typing import Any

from tff_fedwin import checks
from tff_fedwin import choices
from tff_fedwin.experiments import problems as problems_lib

# Each task's data flag (the file or directory it reads).
DATA_FLAGS = {'npz': 'data_npz', 'leaf': 'data_dir', 'text': 'data_jsonl'}
# Task -> the flags only it reads: a non-default value with another task is
# refused.
TASK_FLAGS = {
    'leaf': ('leaf_kind', 'leaf_images_dir', 'leaf_vocab_file'),
    'text': (
        'text_level',
        'text_tokenizer',
        'sequence_length',
        'test_fraction',
        'text_model',
    ),
    'stackoverflow': ('stackoverflow_test_batches',),
    'npz': ('max_npz_bytes',),
}
# The tasks whose models `--model` chooses (image classification).
MODEL_TASKS = ('mnist', 'npz', 'leaf')
# The tasks whose classifier head `--num_classes` sets (leaf: its image and
# vector rows).
NUM_CLASSES_TASKS = ('npz', 'leaf')
# The tasks `--num_clients` and `--dirichlet_alpha` partition.
PARTITIONED_TASKS = ('mnist', 'npz')
# The tasks whose word vocabulary `--vocab_size` sizes (leaf: Sent140-style
# data).
VOCAB_SIZE_TASKS = ('text', 'leaf')
# The tasks with a validation split (`--eval_split=validation`): what it is.
VALIDATION_SPLITS = {
    'mnist': 'its 10,000-example validation split',
    'leaf': "the directory's val/, as LEAF's Reddit writes it",
}
TEXT_SUFFIXES = ('.jsonl', '.csv')


def check_data_flags(config: Any, problems: Any) -> None:
  """Adds a problem naming the flag for each data flag that does not fit.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    problems: The `problems.Problems` each misfit is added to.
  """
  for task, flag in DATA_FLAGS.items():
    value = getattr(config, flag)
    if config.task == task and not value:
      problems.add(f'--{flag} is required with --task={task}.')
    if value and config.task != task:
      problems.add(f'--{flag} is only used with --task={task}.')
  for task, flags in TASK_FLAGS.items():
    for flag in flags:
      if problems_lib.given(config, flag) and config.task != task:
        problems.add(f'--{flag} is only used with --task={task}.')
  if problems_lib.given(config, 'vocab_size'):
    if config.task not in VOCAB_SIZE_TASKS:
      problems.add(
          '--vocab_size is only used with --task='
          f'{" and --task=".join(VOCAB_SIZE_TASKS)} (Sent140-style data).'
      )
    if config.leaf_vocab_file:
      problems.add(
          '--vocab_size does not apply with --leaf_vocab_file (the file is '
          'the vocabulary).'
      )
    with problems.check():
      checks.check_int('--vocab_size', config.vocab_size, minimum=1)
  with problems.check():
    checks.check_int('--max_npz_bytes', config.max_npz_bytes, minimum=0)
  if problems_lib.given(config, 'model') and config.task not in MODEL_TASKS:
    problems.add(
        f'--model chooses the image model of --task='
        f'{", ".join(MODEL_TASKS)}; --task={config.task} has its own model.'
    )
  if config.task == 'text' and config.data_jsonl:
    _check_text(config, problems)
  _check_task_needs(config, problems)


def _check_task_needs(config: Any, problems: Any) -> None:
  """--eval_split=validation, --eval_per_client, --num_classes and the
  partitioned clients fit the task."""
  if config.eval_split == 'validation' and (
      config.task not in VALIDATION_SPLITS
  ):
    needs = ' or '.join(
        f'--task={task} ({split})' for task, split in VALIDATION_SPLITS.items()
    )
    problems.add(
        f'--eval_split=validation needs {needs}; --task={config.task} has a '
        'test set only.'
    )
  if config.eval_per_client and (
      config.task not in choices.TASKS_WITH_TEST_CLIENTS
  ):
    problems.add(
        '--eval_per_client needs a test set with clients: --task='
        f'{" or --task=".join(choices.TASKS_WITH_TEST_CLIENTS)}; the test set '
        f'of --task={config.task} has none.'
    )
  if config.num_classes and config.task not in NUM_CLASSES_TASKS:
    problems.add(
        '--num_classes sets the classifier head of --task='
        f'{" or --task=".join(NUM_CLASSES_TASKS)} '
        "(LEAF's image and vector rows); --task="
        f'{config.task} takes its class count from its data set.'
    )
  if config.task in PARTITIONED_TASKS and (
      config.clients_per_round > config.num_clients
  ):
    problems.add(
        f'--clients_per_round ({config.clients_per_round}) must be <= '
        f'--num_clients ({config.num_clients}).'
    )


def _check_text(config: Any, problems: Any) -> None:
  """--data_jsonl's suffix, --vocab_size, --sequence_length, --test_fraction."""
  if not config.data_jsonl.lower().endswith(TEXT_SUFFIXES):
    problems.add(
        f'--data_jsonl must name a {" or ".join(TEXT_SUFFIXES)} file; got '
        f'{config.data_jsonl!r}.'
    )
  with problems.check():
    checks.check_int('--vocab_size', config.vocab_size, minimum=1)
  with problems.check():
    checks.check_int('--sequence_length', config.sequence_length, minimum=1)
  with problems.check():
    fraction = checks.check_number('--test_fraction', config.test_fraction)
    if not 0 <= fraction < 1:
      raise ValueError(
          f'--test_fraction must be in [0, 1); got {config.test_fraction!r}.'
      )
  if config.text_level == 'char' and problems_lib.given(config, 'vocab_size'):
    problems.add(
        '--vocab_size is for --text_level=word; the character vocabulary is '
        "every character of the training split's texts."
    )
  if config.text_level == 'char' and problems_lib.given(
      config, 'text_tokenizer'
  ):
    problems.add(
        '--text_tokenizer is for --text_level=word; at the character level '
        'every character is a token.'
    )
