"""A tiny federated softmax task shared by the training-loop and runner tests.

A 2-class linear softmax model on 3 features (a keras Dense layer with a fixed
initial kernel, so every run starts from the same model) over 5 clients of 4,
6, 8, 10 and 12 examples, batched by 3; `evaluate_fn` is accuracy and mean
cross-entropy on 30 test examples, in numpy.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import scaffold
from tff_fedwin.data import client_data_from_partition

NUM_FEATURES = 3
NUM_CLASSES = 2
CLIENT_SIZES = (4, 6, 8, 10, 12)
NUM_CLIENTS = len(CLIENT_SIZES)
BATCH_SIZE = 3
_RNG = np.random.default_rng(2024)
INITIAL_KERNEL = (0.5 * _RNG.normal(size=(NUM_FEATURES, NUM_CLASSES))).astype(
    np.float32
)
_TRUE_KERNEL = np.array([[1.0, -1.0], [0.5, 0.2], [-0.3, 0.3]])


def _labelled(num_examples):
  x = _RNG.normal(size=(num_examples, NUM_FEATURES)).astype(np.float32)
  y = np.argmax(x @ _TRUE_KERNEL, axis=1).astype(np.int32)
  return x, y


TRAIN_X, TRAIN_Y = _labelled(sum(CLIENT_SIZES))
TEST_X, TEST_Y = _labelled(30)
_BOUNDS = np.cumsum((0,) + CLIENT_SIZES)
PARTITION = [np.arange(a, b) for a, b in zip(_BOUNDS[:-1], _BOUNDS[1:])]
CLIENT_DATA = client_data_from_partition(TRAIN_X, TRAIN_Y, PARTITION)
CLIENT_IDS = list(CLIENT_DATA.client_ids)

_INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, NUM_FEATURES], tf.float32),
    y=tf.TensorSpec([None], tf.int32),
)


def model_fn():
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.Dense(
              NUM_CLASSES,
              kernel_initializer=tf.keras.initializers.Constant(INITIAL_KERNEL),
              bias_initializer='zeros',
              input_shape=(NUM_FEATURES,),
          )
      ]
  )
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=_INPUT_SPEC,
  )


def preprocess_fn(dataset):
  return dataset.batch(BATCH_SIZE)


def datasets(client_ids):
  """The preprocessed datasets of `client_ids`."""
  return [
      preprocess_fn(CLIENT_DATA.create_tf_dataset_for_client(c))
      for c in client_ids
  ]


def evaluate_fn(model_weights):
  """Accuracy and mean softmax cross-entropy on the test set, in numpy."""
  kernel, bias = (np.asarray(w, np.float64) for w in model_weights.trainable)
  logits = TEST_X.astype(np.float64) @ kernel + bias
  log_norm = np.log(np.sum(np.exp(logits), axis=1))
  loss = np.mean(log_norm - logits[np.arange(len(TEST_Y)), TEST_Y])
  accuracy = np.mean(np.argmax(logits, axis=1) == TEST_Y)
  return {'accuracy': float(accuracy), 'loss': float(loss)}


def client_of(dataset):
  """The id of the client whose examples `dataset` holds (by its first x)."""
  first = next(iter(dataset))['x'].numpy()[0]
  index = int(np.flatnonzero(np.all(TRAIN_X == first, axis=1))[0])
  return CLIENT_IDS[int(np.searchsorted(_BOUNDS, index, side='right')) - 1]


def leaves(structure):
  return [np.asarray(leaf) for leaf in tf.nest.flatten(structure)]


def build_processes(*, with_scaffold_window=False):
  """FedAvg, FedAvg + WiMA (W = 2) and SCAFFOLD processes on this task.

  Client SGD 0.5 for the FedAvg pair, client lr 0.2 for SCAFFOLD; with
  `with_scaffold_window` also SCAFFOLD + WiMA (W = 2) as `'scaffold_window'`.
  """
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=0.5)
  processes = {
      'fedavg': fed_win.build_fed_win(model_fn, sgd),
      'window': fed_win.build_fed_win(model_fn, sgd, window_size=2),
      'scaffold': scaffold.build_scaffold(
          model_fn, client_learning_rate=0.2, total_clients=NUM_CLIENTS
      ),
  }
  if with_scaffold_window:
    processes['scaffold_window'] = scaffold.build_scaffold(
        model_fn,
        client_learning_rate=0.2,
        total_clients=NUM_CLIENTS,
        window_size=2,
    )
  return processes
