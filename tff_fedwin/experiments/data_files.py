"""An experiment's data files, read and checked before TensorFlow is imported.

`scripts/run_experiment.py` calls `read_data_files` after `validate_config`
and before anything imports TensorFlow: a missing or malformed `--data_npz`,
`--data_dir` (LEAF) or `--data_jsonl` file is refused in one line in about a
second, and `run_experiment` then builds the task from what was read
(`tff_fedwin.tasks.data_files`) instead of reading it again.
"""

import os

from tff_fedwin.experiments import config as config_lib
from tff_fedwin.experiments import data_flags
from tff_fedwin.experiments import problems
from tff_fedwin.tasks import data_files

# Each task's data flag -> (whether it names a directory, what it must name).
_DATA_PATHS = {
    'data_npz': (
        False,
        'a .npz file holding x_train, y_train, x_test and y_test',
    ),
    'data_dir': (
        True,
        "a LEAF data directory (train/*.json, test/*.json, as LEAF's "
        'preprocess.sh writes them)',
    ),
    'data_jsonl': (False, 'a .jsonl or .csv file of client_id, text records'),
}


def leaf_options(config: config_lib.ExperimentConfig) -> data_files.LeafOptions:
  """What `--task=leaf` passes on beside the directory: CelebA's images,
  Sent140's and Reddit's vocabulary (`--vocab_size` only when given), and
  `--eval_split=validation` as the directory's `val/` folder."""
  return data_files.LeafOptions(
      images_dir=config.leaf_images_dir,
      vocab_file=config.leaf_vocab_file,
      vocab_size=(
          config.vocab_size if problems.given(config, 'vocab_size') else None
      ),
      eval_dir='val' if config.eval_split == 'validation' else None,
  )


def _check_data_path(config: config_lib.ExperimentConfig) -> None:
  """Raises InputDataError naming the flag if the task's data path is not there.

  The loaders name the file in their own errors about its contents; a path
  that does not exist, or is a file where a directory is due (or the other
  way round), is the flag's problem and is named as such.
  """
  flag = data_flags.DATA_FLAGS.get(config.task)
  path = getattr(config, flag) if flag else None
  if not path:
    return
  is_dir, wanted = _DATA_PATHS[flag]
  if not os.path.exists(path):
    problem = 'no such directory' if is_dir else 'no such file'
  elif is_dir != os.path.isdir(path):
    problem = 'not a directory' if is_dir else 'a directory'
  else:
    return
  raise config_lib.InputDataError(
      f'--{flag} must name {wanted}; {path}: {problem}.'
  )


def read_data_files(config: config_lib.ExperimentConfig) -> None:
  """Reads and checks `config`'s data files, if its task has any.

  Args:
    config: A config that passed `validate_config`.

  Raises:
    InputDataError: The data flag naming no such file or directory
      (`_check_data_path`), the file's one-line error (it names the file), or
      `--clients_per_round` above the number of clients the files hold.
  """
  _check_data_path(config)
  with config_lib.as_input_data_error():
    num_train_clients = data_files.read_data_files(
        config.task,
        data_npz=config.data_npz,
        scale_integer_features=config.scale_integer_features,
        max_npz_bytes=config.max_npz_bytes,
        data_dir=config.data_dir,
        leaf_kind=config.leaf_kind,
        leaf_options=leaf_options(config),
        cache_dir=config.cache_dir,
        data_jsonl=config.data_jsonl,
        test_fraction=config.test_fraction,
    )
  if num_train_clients is not None:
    config_lib.check_clients_per_round(config, num_train_clients)
