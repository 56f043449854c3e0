"""`validate_config` reports every problem at once, naming the decided choices.

Each problem is its own line of the one ValueError (the script prints each as
`run_experiment.py: <line>`); the messages that list tasks or algorithms list
exactly the constant the check uses, so they cannot drift from the code.
"""

import re

import attrs
import pytest

from tests.experiments import config_fixtures
from tff_fedwin import choices
from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import data_flags

BASE = config_fixtures.BASE


def _problems(**overrides):
  """The lines of `validate_config`'s error for BASE with `overrides`."""
  with pytest.raises(ValueError) as raised:
    experiments.validate_config(attrs.evolve(BASE, **overrides))
  return str(raised.value).splitlines()


def test_every_misfit_of_the_flags_is_one_line():
  # The three problems of one command line (issue 68): W > the rounds, the
  # multiples rule, broadcast with E != 1; and an algorithm misfit besides.
  assert _problems(
      window_size=12,
      window_mode='broadcast',
      window_read_every=2,
      rounds_per_eval=3,
      server_epsilon=0.1,
  ) == [
      '--window_size (12) must be <= --total_rounds (10): the window model is '
      'active from round max(W, --window_start_round) on, so it would never '
      'be used.',
      '--rounds_per_eval (3) and --total_rounds (10) must be multiples of '
      '--window_read_every (2): the window model exists only at those rounds.',
      '--window_read_every must be 1 with --window_mode=broadcast.',
      '--server_epsilon is the adaptivity of --algorithm=fedadam or fedyogi; '
      '--algorithm=fedavg has none.',
  ]


def test_every_bad_value_is_one_line_and_the_misfits_wait_for_them():
  # Values are checked each on its own; how they fit (here W > the rounds)
  # is checked once they all pass, as it compares them.
  assert _problems(
      total_rounds=0, client_batch_size=0, seed=-1, window_size=12
  ) == [
      '--total_rounds must be an integer >= 1, got 0.',
      '--client_batch_size must be an integer >= 1, got 0.',
      '--seed must be an integer >= 0, got -1.',
  ]


def test_data_flag_misfits_are_each_a_line():
  assert _problems(
      task='text',
      data_npz=None,
      data_jsonl='posts.txt',
      sequence_length=0,
      leaf_kind='femnist',
  ) == [
      '--leaf_kind is only used with --task=leaf.',
      "--data_jsonl must name a .jsonl or .csv file; got 'posts.txt'.",
      '--sequence_length must be an integer >= 1, got 0.',
  ]


def test_a_missing_text_file_flag_skips_the_checks_of_the_file():
  assert _problems(task='text', data_npz=None) == [
      '--data_jsonl is required with --task=text.'
  ]


def test_a_repeated_problem_is_one_line():
  # `--workers` is parsed by two checks (worker_bind and the transfers).
  assert _problems(workers='host:0') == [
      '--workers must be empty, an integer >= 1 or a comma list of host:port '
      "with ports 1-65535; got 'host:0' in 'host:0'."
  ]


def _named(line, names):
  return {name for name in names if re.search(rf'\b{name}\b', line)}


# A config outside each list (the flag's task or algorithm is named too) ->
# the tasks its one problem must list.
_TASK_MESSAGES = [
    pytest.param(
        dict(task='mnist', data_npz=None, eval_per_client=True),
        choices.TASKS_WITH_TEST_CLIENTS,
        id='eval_per_client',
    ),
    pytest.param(
        dict(task='shakespeare', data_npz=None, model='cnn'),
        data_flags.MODEL_TASKS,
        id='model',
    ),
    pytest.param(
        dict(task='mnist', data_npz=None, num_classes=10),
        data_flags.NUM_CLASSES_TASKS,
        id='num_classes',
    ),
    pytest.param(
        dict(eval_split='validation'),
        tuple(data_flags.VALIDATION_SPLITS),
        id='eval_split',
    ),
    pytest.param(
        dict(vocab_size=5),
        data_flags.VOCAB_SIZE_TASKS,
        id='vocab_size',
    ),
    pytest.param(
        dict(task='shakespeare', data_npz=None, client_loss='wsm'),
        choices.CLASSIFICATION_TASKS,
        id='client_loss',
    ),
]


@pytest.mark.parametrize('overrides, tasks', _TASK_MESSAGES)
def test_messages_list_the_tasks_of_the_check(overrides, tasks):
  (line,) = _problems(**overrides)
  given = overrides.get('task', BASE.task)
  assert _named(line, choices.TASKS) - {given} == set(tasks), line


_ALGORITHM_MESSAGES = [
    pytest.param(
        dict(algorithm='mime_lite', client_lr_schedule='decay'),
        config_lib.CLIENT_SCHEDULE_ALGORITHMS,
        id='client_lr_schedule',
    ),
    pytest.param(
        dict(algorithm='mime_lite', client_momentum=0.9),
        config_lib.CLIENT_OPTIMIZER_ALGORITHMS,
        id='client_momentum',
    ),
    pytest.param(
        dict(algorithm='mime_lite', client_weight_decay=0.001),
        config_lib.WEIGHT_DECAY_ALGORITHMS,
        id='client_weight_decay',
    ),
    pytest.param(
        dict(algorithm='fedprox', server_epsilon=0.1),
        config_lib.ADAPTIVE_SERVER_ALGORITHMS,
        id='server_epsilon',
    ),
]


@pytest.mark.parametrize('overrides, algorithms', _ALGORITHM_MESSAGES)
def test_messages_list_the_algorithms_of_the_check(overrides, algorithms):
  (line,) = _problems(**overrides)
  named = _named(line, config_lib.ALGORITHMS) - {overrides['algorithm']}
  assert named == set(algorithms), line


def test_runs_go_to_the_current_directory_by_default():
  assert experiments.ExperimentConfig().root_output_dir == 'runs'
