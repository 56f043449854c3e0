"""TFF's EMNIST and StackOverflow tasks, with a clear error when offline."""

import collections
import os
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import data
from tff_fedwin import errors
from tff_fedwin.tasks import emnist as emnist_lib
from tff_fedwin.tasks import per_client
from tff_fedwin.tasks import task as task_lib
from tff_fedwin.tasks import task_options

Task = task_lib.Task

STACKOVERFLOW_VOCAB_SIZE = 10000
# Posts per test batch: TFF's default eval ClientSpec (word_prediction_tasks).
_STACKOVERFLOW_EVAL_BATCH = 64
# The files TFF 0.87 reads (after an LZMA/bz2 download) for the tasks.
EMNIST_FILE = 'emnist_all.sqlite'
STACKOVERFLOW_FILE = 'stackoverflow.sqlite'
STACKOVERFLOW_WORD_COUNTS = 'stackoverflow.word_count.tar.bz2'
_TFF_DEFAULT_CACHE = os.path.join('~', '.tff')
_KERAS_CACHE = os.path.join('~', '.keras', 'datasets')
# Keras' `get_file` turns a failed download into a bare `Exception` so worded.
_KERAS_FETCH_FAILURE = 'URL fetch failure'


class DataUnavailableError(errors.EnvironmentProblemError):
  """A task's data could not be downloaded and is not in the cache."""


def _is_download_failure(error: Exception) -> bool:
  """Whether `error` is how TFF or Keras report a failed download."""
  # urllib's URLError (TFF's LZMA fetch) is an OSError, as are socket errors.
  return isinstance(error, OSError) or str(error).startswith(
      _KERAS_FETCH_FAILURE
  )


def _download_failure_reason(error: Exception) -> str:
  reason = getattr(error, 'reason', None) or error
  return ' '.join(f'{type(error).__name__}: {reason}'.split())


def _cache_dir_text(cache_dir: Optional[str]) -> str:
  if cache_dir is None:
    return f"cache_dir=None (TFF's default {_TFF_DEFAULT_CACHE})"
  return f'cache_dir={cache_dir!r}'


def _load_emnist(cache_dir: Optional[str]):
  """TFF's EMNIST (train, test), or DataUnavailableError if not obtainable."""
  try:
    return tff.simulation.datasets.emnist.load_data(
        only_digits=False, cache_dir=cache_dir
    )
  except Exception as e:  # pylint: disable=broad-except
    if not _is_download_failure(e):
      raise
    raise DataUnavailableError(
        f'Task emnist: downloading EMNIST into {_cache_dir_text(cache_dir)} '
        f'failed ({_download_failure_reason(e)}). To run offline, set '
        f'cache_dir to a directory holding the extracted {EMNIST_FILE}, or '
        f'set use_synthetic_data=True.'
    ) from e


def _without_shuffle_seed(preprocess_fn):
  """TFF's baseline preprocessing, taking (and ignoring) a `shuffle_seed`.

  TFF's StackOverflow preprocessing shuffles unseeded, a new order every
  round already; the `Task.preprocess_fn` signature is kept.
  """

  def preprocess(dataset, shuffle_seed=None):
    del shuffle_seed  # TFF's shuffle is unseeded.
    return preprocess_fn(dataset)

  return preprocess


def _in_client_order(client_data) -> tf.data.Dataset:
  """Every client's examples, client after client in `client_ids` order.

  `create_tf_dataset_from_all_clients()` without a seed shuffles the clients
  with an unseeded generator: another order, so other batches, every run.
  """
  return tf.data.Dataset.from_tensor_slices(client_data.client_ids).flat_map(
      client_data.serializable_dataset_fn
  )


def _test_clients(
    client_data, limit: Optional[int] = None
) -> per_client.TestClients:
  """Each client's examples in `_in_client_order`, counted in one pass.

  With `limit`, of the first `limit` examples only (the pass stops there;
  the last client counted may be cut).
  """
  ids = tf.constant(client_data.client_ids)
  indices = tf.data.Dataset.range(len(client_data.client_ids)).flat_map(
      lambda i: client_data.serializable_dataset_fn(ids[i]).map(lambda _: i)
  )
  if limit is not None:
    indices = indices.take(limit)
  counts = np.zeros(len(client_data.client_ids), np.int64)
  for batch in indices.batch(65536).as_numpy_iterator():
    counts += np.bincount(batch, minlength=len(counts))
  return per_client.TestClients.from_counts(client_data.client_ids, counts)


def emnist_task(o: task_options.TaskOptions) -> Task:
  """TFF's EMNIST-62 (FEMNIST) with the test clients' data in id order.

  Reads `o.batch_size`, `epochs`, `seed`, `shuffle_buffer`, `cache_dir`,
  `use_synthetic_data` and `eval_per_client`: also count each test client's
  examples (`Task.test_clients`; one pass over the test set).
  """
  if o.use_synthetic_data:
    train = test = tff.simulation.datasets.emnist.get_synthetic()
  else:
    train, test = _load_emnist(o.cache_dir)

  def to_xy(element):
    return collections.OrderedDict(
        x=tf.expand_dims(element['pixels'], -1),
        y=tf.cast(element['label'], tf.int32),
    )

  train_data = train.preprocess(lambda ds: ds.map(to_xy))
  if not o.use_synthetic_data:  # A query per client id (TFF's SqlClientData).
    train_data = data.datasets_from_ids(train_data)
  preprocess_fn = task_lib.batching_fn(
      o.batch_size, o.epochs, o.seed, o.shuffle_buffer
  )
  test_data = _in_client_order(test).map(to_xy).batch(1000)
  element_spec = preprocess_fn(
      train_data.create_tf_dataset_for_client(train_data.client_ids[0])
  ).element_spec
  model_fn = task_lib.classification_model_fn(
      lambda: emnist_lib.create_cnn_dropout_model(62, o.seed), element_spec
  )
  return Task(
      'emnist',
      model_fn,
      train_data,
      preprocess_fn,
      test_data,
      62,
      test_clients=_test_clients(test) if o.eval_per_client else None,
  )


def stackoverflow_task(o: task_options.TaskOptions) -> Task:
  """TFF's StackOverflow next-word task, its test clients in id order.

  Reads `o.batch_size`, `epochs`, `cache_dir`, `use_synthetic_data`;
  `shuffle_buffer`, TFF's `ClientSpec.shuffle_buffer_size` (None: TFF's
  default; TFF's shuffle is unseeded); `stackoverflow_test_batches`, the
  first batches of the test set evaluated (0: all): TFF's test clients'
  posts client after client in id order (`_in_client_order`, not TFF's
  centralized test data, whose client order is unseeded), preprocessed by
  TFF's eval function; `eval_per_client`: also count each test client's
  posts among those (`Task.test_clients`; the last client may be cut by the
  test batches).
  """
  test_batches = o.stackoverflow_test_batches
  try:
    baseline = (
        tff.simulation.baselines.stackoverflow.create_word_prediction_task(
            tff.simulation.baselines.ClientSpec(
                num_epochs=o.epochs,
                batch_size=o.batch_size,
                shuffle_buffer_size=o.shuffle_buffer,
            ),
            vocab_size=STACKOVERFLOW_VOCAB_SIZE,
            cache_dir=o.cache_dir,
            use_synthetic_data=o.use_synthetic_data,
        )
    )
  except Exception as e:  # pylint: disable=broad-except
    if o.use_synthetic_data or not _is_download_failure(e):
      raise
    raise DataUnavailableError(
        f'Task stackoverflow: downloading StackOverflow into '
        f'{_cache_dir_text(o.cache_dir)} failed '
        f'({_download_failure_reason(e)}). To run offline, set cache_dir to '
        f'a directory holding the extracted '
        f"{STACKOVERFLOW_FILE} and put {STACKOVERFLOW_WORD_COUNTS} in Keras' "
        f'cache {_KERAS_CACHE} (TFF reads the word counts there, not in '
        f'cache_dir), or set use_synthetic_data=True.'
    ) from e
  datasets = baseline.datasets
  train_data = datasets.train_data
  test_data = datasets.eval_preprocess_fn(_in_client_order(datasets.test_data))
  if not o.use_synthetic_data:
    # A query per client id (TFF's SqlClientData).
    train_data = data.datasets_from_ids(train_data)
  if test_batches:  # 100 by default: a tractable eval on CPU.
    test_data = test_data.take(test_batches)
  limit = test_batches * _STACKOVERFLOW_EVAL_BATCH if test_batches else None
  # TFF's word-prediction ids: 0 pad, 1..vocab words, then OOV, BOS, EOS.
  return Task(
      'stackoverflow',
      baseline.model_fn,
      train_data,
      _without_shuffle_seed(datasets.train_preprocess_fn),
      test_data,
      STACKOVERFLOW_VOCAB_SIZE + 4,
      pad_label=0,
      test_clients=(
          _test_clients(datasets.test_data, limit)
          if o.eval_per_client
          else None
      ),
  )
