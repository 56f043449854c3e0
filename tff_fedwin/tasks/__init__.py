"""Models and preprocessing per task.

The data-file checks (`data_files`) import without TensorFlow; the models and
input specs below are imported on first use (`tff_fedwin.lazy_names`).
"""

import typing

from tff_fedwin import lazy_names

if typing.TYPE_CHECKING:  # The names imported on first use, for type checkers.
  from tff_fedwin.tasks.emnist import create_cnn_dropout_model
  from tff_fedwin.tasks.emnist import emnist_input_spec
  from tff_fedwin.tasks.emnist import synthetic_client_datasets
  from tff_fedwin.tasks.evaluation import TestSetEvaluator
  from tff_fedwin.tasks.shakespeare import create_char_model
  from tff_fedwin.tasks.shakespeare import shakespeare_input_spec

# name -> the module that defines it; imported on first use (TensorFlow).
_HEAVY = {
    'create_cnn_dropout_model': 'tff_fedwin.tasks.emnist',
    'emnist_input_spec': 'tff_fedwin.tasks.emnist',
    'synthetic_client_datasets': 'tff_fedwin.tasks.emnist',
    'TestSetEvaluator': 'tff_fedwin.tasks.evaluation',
    'create_char_model': 'tff_fedwin.tasks.shakespeare',
    'shakespeare_input_spec': 'tff_fedwin.tasks.shakespeare',
}

__getattr__, __dir__ = lazy_names.module_hooks(__name__, _HEAVY, globals())
