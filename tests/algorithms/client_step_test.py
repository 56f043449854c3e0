"""Tests for tff_fedwin.algorithms.client_step.

The step's arithmetic (SGD, WSM, the transforms, SAM, MIME, FedFA) is checked
against numpy through `client_training` in client_training_test.py and the
algorithms' own tests; here, what only this module decides.
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_step


def test_batch_size_falls_back_to_the_predictions():
  output = tff.learning.models.BatchOutput(
      loss=tf.constant(0.0),
      predictions=tf.zeros([4, 3]),
      num_examples=None,
  )
  assert client_step.batch_size(output).numpy() == 4


def test_batch_size_is_the_models_count_when_it_reports_one():
  # The model's count wins over the predictions' 4 rows (an int32 5 -> int64).
  output = tff.learning.models.BatchOutput(
      loss=tf.constant(0.0),
      predictions=tf.zeros([4, 3]),
      num_examples=tf.constant(5, tf.int32),
  )
  size = client_step.batch_size(output)
  assert size.dtype == tf.int64 and size.numpy() == 5
