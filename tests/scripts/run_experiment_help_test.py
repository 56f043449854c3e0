"""scripts/run_experiment.py --helpfull names the choices the code decides.

Every flag whose help lists tasks, algorithms or LEAF kinds must list exactly
the constant that the flag checks use (`choices`, `experiments.data_flags`,
`experiments.config`): a task added to `TASKS_WITH_TEST_CLIENTS` and missing
from `--eval_per_client`'s help fails here. The help is read as a user reads
it, from one `--helpfull` run (no TensorFlow import; about a second).
"""

import os
import re
import subprocess
import sys

import pytest

from tff_fedwin import choices
from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import data_flags

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_SCRIPT = os.path.join(_ROOT, 'scripts', 'run_experiment.py')


# Flag -> the tasks its help must name, as the checks decide them.
_TASK_LISTS = {
    'eval_per_client': choices.TASKS_WITH_TEST_CLIENTS,
    'model': data_flags.MODEL_TASKS,
    'num_classes': data_flags.NUM_CLASSES_TASKS,
    'eval_split': tuple(data_flags.VALIDATION_SPLITS),
    'vocab_size': data_flags.VOCAB_SIZE_TASKS,
    'num_clients': data_flags.PARTITIONED_TASKS,
    'dirichlet_alpha': data_flags.PARTITIONED_TASKS,
    **{flag: (task,) for task, flag in data_flags.DATA_FLAGS.items()},
    # --leaf_kind's help names LEAF's kinds (shakespeare among them): below.
    **{
        flag: (task,)
        for task, flags in data_flags.TASK_FLAGS.items()
        for flag in flags
        if flag != 'leaf_kind'
    },
}
# Flag -> the algorithms its help must name, as the checks decide them.
_ALGORITHM_LISTS = {
    'client_lr_schedule': config_lib.CLIENT_SCHEDULE_ALGORITHMS,
    'client_momentum': config_lib.CLIENT_OPTIMIZER_ALGORITHMS,
    'client_weight_decay': config_lib.WEIGHT_DECAY_ALGORITHMS,
    'server_epsilon': config_lib.ADAPTIVE_SERVER_ALGORITHMS,
    'server_learning_rate': config_lib.ALGORITHMS,
}


@pytest.fixture(scope='module')
def helps():
  """Flag name -> its --helpfull text (one line, the enum's <a|b> left out)."""
  result = subprocess.run(
      [sys.executable, _SCRIPT, '--helpfull'],
      capture_output=True,
      text=True,
      timeout=120,
      check=False,
      cwd=_ROOT,
  )
  found = {}
  for block in re.split(r'\n  --(?:\[no\])?', result.stdout)[1:]:
    name, _, text = block.partition(':')
    text = re.sub(r'^\s*<[^>]*>:', '', text)  # absl's list of the choices.
    text = text.split('(default:')[0]
    found[name] = ' '.join(text.split())
  assert 'eval_per_client' in found, result.stdout[-3000:] + result.stderr
  return found


def _named(text, names):
  """The names among `names` that `text` holds as words."""
  return {name for name in names if re.search(rf'\b{name}\b', text)}


@pytest.mark.parametrize('flag', sorted(_TASK_LISTS))
def test_help_names_the_tasks_of_the_check(helps, flag):
  assert _named(helps[flag], choices.TASKS) == set(_TASK_LISTS[flag]), helps[
      flag
  ]


@pytest.mark.parametrize('flag', sorted(_ALGORITHM_LISTS))
def test_help_names_the_algorithms_of_the_check(helps, flag):
  named = _named(helps[flag], config_lib.ALGORITHMS)
  assert named == set(_ALGORITHM_LISTS[flag]), helps[flag]


def test_leaf_kind_help_describes_every_kind(helps):
  described = re.findall(r'(\w+) \(', helps['leaf_kind'])
  assert sorted(described) == sorted(choices.LEAF_KINDS), helps['leaf_kind']


def test_learning_rate_help_names_each_kinds_rates(helps):
  assert helps['client_learning_rate'].startswith(
      "Client SGD learning rate; unset: the task's default: classification "
      '0.05; next word (stackoverflow, text, leaf reddit) 0.316; next '
      'character (shakespeare, leaf shakespeare, text --text_level=char) 1 '
      '(Reddi et al. 2021; docs/data.md).'
  )
  assert (
      'next word (stackoverflow, text, leaf reddit) fedavg 1, fedavgm 1, '
      'fedadam 0.01, fedyogi 0.01;' in helps['server_learning_rate']
  )
