"""Models and preprocessing per task."""

from tff_fedwin.tasks.emnist import create_cnn_dropout_model
from tff_fedwin.tasks.emnist import emnist_input_spec
from tff_fedwin.tasks.emnist import synthetic_client_datasets
from tff_fedwin.tasks.evaluation import TestSetEvaluator
from tff_fedwin.tasks.shakespeare import create_char_model
from tff_fedwin.tasks.shakespeare import shakespeare_input_spec
