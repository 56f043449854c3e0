"""Tests for tff_fedwin.tasks.registry: `npz` feature scaling and offline data.

EMNIST and StackOverflow are built with the network cut off (name resolution
fails, as on a machine without network), so TFF's and Keras' real download code
runs and fails at once; EMNIST and StackOverflow from small databases stand in
for the real ones to check their training data is built by id.
"""

import collections
import socket

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import data
from tff_fedwin.algorithms import client_data_bundle
from tff_fedwin.tasks import registry


def _write_uint8_npz(tmp_path):
  """20 train and 10 test 8x8 uint8 images over pixel values 0..255."""
  rng = np.random.default_rng(0)
  path = str(tmp_path / 'images.npz')
  x_train = rng.integers(0, 256, size=[20, 8, 8], dtype=np.uint8)
  x_train[0, 0, 0] = 255
  x_test = rng.integers(0, 256, size=[10, 8, 8], dtype=np.uint8)
  x_test[0, 0, 0] = 255
  np.savez(
      path,
      x_train=x_train,
      y_train=np.arange(20) % 2,
      x_test=x_test,
      y_test=np.arange(10) % 2,
  )
  return path


def _test_features(task):
  return np.concatenate([batch['x'].numpy() for batch in task.test_data])


def _sorted_rows(x):
  """The examples of `x` as a sorted list of their flat values' bytes."""
  return sorted(row.tobytes() for row in x.reshape(len(x), -1))


def test_npz_task_scales_uint8_features_to_unit_interval(tmp_path):
  path = _write_uint8_npz(tmp_path)
  task = registry.create_task(
      'npz',
      batch_size=4,
      num_clients=2,
      dirichlet_alpha=float('inf'),
      data_npz=path,
  )
  with np.load(path) as stored:
    # A uint8 pixel v becomes v / 255 in float32 (255 -> exactly 1.0).
    expected_train, expected_test = (
        stored[key].astype(np.float32) / np.float32(255)
        for key in ('x_train', 'x_test')
    )
  x_test = _test_features(task)
  assert x_test.dtype == np.float32
  np.testing.assert_array_equal(x_test, expected_test)
  assert x_test[0, 0, 0] == 1.0
  # The clients' examples, in any order, are the 20 stored ones scaled.
  x_train = np.stack(
      [
          example['x'].numpy()
          for client_id in task.train_data.client_ids
          for example in task.train_data.create_tf_dataset_for_client(client_id)
      ]
  )
  assert x_train.dtype == np.float32
  assert _sorted_rows(x_train) == _sorted_rows(expected_train)


def test_npz_task_without_scaling_keeps_pixel_values(tmp_path):
  task = registry.create_task(
      'npz',
      batch_size=4,
      num_clients=2,
      dirichlet_alpha=float('inf'),
      data_npz=_write_uint8_npz(tmp_path),
      scale_integer_features=False,
  )
  assert _test_features(task).max() == 255.0


@pytest.fixture
def offline(monkeypatch):
  """Cuts the network off: every host name fails to resolve."""

  def no_network(*args, **kwargs):
    del args, kwargs
    raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')

  monkeypatch.setattr(socket, 'getaddrinfo', no_network)


def _assert_offline_message(error, task, files):
  message = str(error.value)
  assert '\n' not in message
  assert message.startswith(f'Task {task}: ')
  assert 'failed' in message and 'Name or service not known' in message
  for text in ['cache_dir', 'use_synthetic_data=True', *files]:
    assert text in message, message


@pytest.mark.parametrize(
    'task, files',
    [
        pytest.param('emnist', ['emnist_all.sqlite'], id='emnist'),
        pytest.param(
            'stackoverflow',
            ['stackoverflow.sqlite', 'stackoverflow.word_count.tar.bz2'],
            id='stackoverflow',
        ),
    ],
)
def test_download_failure_raises_data_unavailable(
    tmp_path, offline, task, files
):
  del offline
  cache_dir = tmp_path / 'cache'
  cache_dir.mkdir()
  with pytest.raises(
      registry.DataUnavailableError, match=f'^Task {task}: '
  ) as error:
    registry.create_task(task, batch_size=2, cache_dir=str(cache_dir))
  _assert_offline_message(error, task, files)
  assert str(cache_dir) in str(error.value)
  assert not list(cache_dir.iterdir())


def test_stackoverflow_word_counts_download_failure_raises_data_unavailable(
    tmp_path, offline, monkeypatch
):
  """The sqlite file is there; Keras' fetch of the word counts fails."""
  del offline
  monkeypatch.setenv('HOME', str(tmp_path))  # Keras' cache is ~/.keras.
  monkeypatch.setattr(
      tff.simulation.datasets.stackoverflow,
      'load_data',
      lambda cache_dir=None: (None, None, None),
  )
  with pytest.raises(
      registry.DataUnavailableError, match='URL fetch failure'
  ) as error:
    registry.create_task('stackoverflow', batch_size=2, cache_dir=str(tmp_path))
  _assert_offline_message(error, 'stackoverflow', [])


def test_errors_other_than_downloads_propagate(monkeypatch):
  def corrupt(**kwargs):
    del kwargs
    raise KeyError('all_train')

  monkeypatch.setattr(tff.simulation.datasets.emnist, 'load_data', corrupt)
  # The loader's own KeyError, unchanged (str of a KeyError is its repr).
  with pytest.raises(KeyError, match="^'all_train'$"):
    registry.create_task('emnist', batch_size=2, cache_dir='/nonexistent')


def test_evaluate_fn_is_mean_cross_entropy_and_accuracy(tmp_path):
  # 2,300 test examples: batches of 1,000, 1,000 and 300, so the sums run
  # over batches of two shapes. Expected values in numpy from the logits:
  # mean over examples of logsumexp(z) - z[y], and the fraction argmax(z) = y.
  rng = np.random.default_rng(4)
  path = str(tmp_path / 'eval.npz')
  y_test = rng.integers(0, 3, 2300)
  np.savez(
      path,
      x_train=rng.random((30, 6), dtype=np.float32),
      y_train=np.arange(30) % 3,
      x_test=rng.random((2300, 6), dtype=np.float32),
      y_test=y_test,
  )
  task = registry.create_task(
      'npz', batch_size=10, num_clients=2, dirichlet_alpha=1.0, data_npz=path
  )
  keras_model = registry.create_mnist_cnn((6,), 3, seed=9)  # The task's MLP.
  weights = tff.learning.models.ModelWeights(
      trainable=[w.numpy() for w in keras_model.trainable_weights],
      non_trainable=[w.numpy() for w in keras_model.non_trainable_weights],
  )
  x_test = np.load(path)['x_test']
  logits = keras_model(x_test).numpy().astype(np.float64)
  top = logits.max(axis=1)
  logsumexp = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
  expected_loss = np.mean(logsumexp - logits[np.arange(2300), y_test])
  expected_accuracy = np.mean(logits.argmax(axis=1) == y_test)

  metrics = task.build_evaluate_fn()(weights)

  assert metrics['loss'] == pytest.approx(expected_loss, rel=1e-5)
  assert metrics['accuracy'] == pytest.approx(expected_accuracy, abs=1e-12)


def test_mnist_evaluates_on_the_validation_split_when_asked():
  task = registry.create_task(
      'mnist', batch_size=20, num_clients=10, eval_split='validation'
  )
  # `load_mnist` (checked against the file in tests/data) gives the labels.
  _, (_, y_val) = data.load_mnist(held_out='validation')
  labels = np.concatenate([batch['y'].numpy() for batch in task.test_data])
  np.testing.assert_array_equal(labels, y_val)


@pytest.mark.parametrize(
    'task,eval_split,message',
    [
        ('mnist', 'train', '`eval_split` must be one of'),
        ('npz', 'validation', 'with task mnist .* and leaf'),
        ('shakespeare', 'validation', 'with task mnist .* and leaf'),
    ],
)
def test_refuses_a_split_the_task_does_not_have(task, eval_split, message):
  with pytest.raises(ValueError, match=message):
    registry.create_task(
        task, batch_size=2, data_npz='x.npz', eval_split=eval_split
    )


def test_every_task_has_one_builder():
  assert set(registry.BUILDERS) == set(registry.TASKS)


def test_an_unknown_option_is_refused_by_name():
  with pytest.raises(TypeError, match='batch_sise'):
    registry.create_task('mnist', batch_sise=2)


@pytest.mark.parametrize(
    'task,message',
    [
        ('npz', '`data_npz` .* is required for task npz'),
        ('leaf', '`data_dir` .* is required for task leaf'),
        ('text', '`data_jsonl` .* is required for task text'),
    ],
)
def test_a_task_without_its_data_file_names_the_option(task, message):
  with pytest.raises(ValueError, match=message):
    registry.create_task(task, batch_size=2)


def _sql_client_data(path, examples, element_spec):
  """`examples` (client id -> dict of arrays) in a database at `path`, parsed
  as TFF's loaders return their data (a preprocess over `SqlClientData`)."""
  tff.simulation.datasets.save_to_sql_client_data(
      list(examples),
      lambda c: tf.data.Dataset.from_tensor_slices(
          collections.OrderedDict(
              (key, tf.constant(examples[c][key], spec.dtype))
              for key, spec in element_spec.items()
          )
      ),
      path,
  )
  return tff.simulation.datasets.load_and_parse_sql_client_data(
      path, element_spec
  )


def _patch_emnist(tmp_path, monkeypatch, labels, pixels):
  """TFF's EMNIST loader patched to give these writers as train and test.

  `labels`, `pixels`: writer -> its labels and its [n, 28, 28] images, in
  a SQLite database of EMNIST's element structure (TFF's SqlClientData).
  """
  parsed = _sql_client_data(
      str(tmp_path / 'emnist.sqlite'),
      {c: dict(label=labels[c], pixels=pixels[c]) for c in labels},
      collections.OrderedDict(
          label=tf.TensorSpec([], tf.int32),
          pixels=tf.TensorSpec([28, 28], tf.float32),
      ),
  )
  monkeypatch.setattr(
      tff.simulation.datasets.emnist,
      'load_data',
      lambda **kwargs: (parsed, parsed),
  )


def test_emnist_training_data_is_built_by_id_in_the_workers(
    tmp_path, monkeypatch
):
  # Two writers with EMNIST's element structure.
  pixels = {
      'w0': np.stack([np.full((28, 28), 0.25), np.full((28, 28), 0.75)]),
      'w1': np.full((1, 28, 28), 0.5),
  }
  labels = {'w0': [3, 61], 'w1': [7]}
  _patch_emnist(tmp_path, monkeypatch, labels, pixels)

  task = registry.create_task('emnist', batch_size=2, cache_dir='unused')

  # A query per id: the workers build the datasets, no bundle is written.
  assert client_data_bundle.builds_datasets_from_ids(task.train_data)
  (batch,) = list(
      task.preprocess_fn(task.train_data.create_tf_dataset_for_client('w0'))
  )
  order = np.argsort(batch['y'])  # The task shuffles each client's examples.
  np.testing.assert_array_equal(batch['y'].numpy()[order], [3, 61])
  np.testing.assert_array_equal(batch['x'].numpy()[order][..., 0], pixels['w0'])


def test_emnist_test_set_is_in_client_order_with_its_clients(
    tmp_path, monkeypatch
):
  # Three writers (ids sorted by TFF's SqlClientData): the pooled test set is
  # w0's examples, then w1's, then w2's (TFF's own pooling shuffles the
  # writers unseeded); per-client evaluation counts 2, 1, 3.
  labels = {'w0': [3, 61], 'w1': [7], 'w2': [1, 2, 5]}
  pixels = {c: np.full((len(y), 28, 28), 0.5) for c, y in labels.items()}
  _patch_emnist(tmp_path, monkeypatch, labels, pixels)

  task = registry.create_task(
      'emnist', batch_size=2, cache_dir='unused', eval_per_client=True
  )

  (batch,) = list(task.test_data)
  np.testing.assert_array_equal(batch['y'], [3, 61, 7, 1, 2, 5])
  assert task.test_clients.client_ids == ('w0', 'w1', 'w2')
  np.testing.assert_array_equal(
      task.test_clients.example_client, [0, 0, 1, 2, 2, 2]
  )
  assert (
      registry.create_task(
          'emnist', batch_size=2, cache_dir='unused'
      ).test_clients
      is None
  )  # Counted only when asked (a pass over the data).


def _stackoverflow_posts(tmp_path, monkeypatch, posts):
  """TFF's StackOverflow loaders patched to read `posts` (user -> token texts).

  The same users are the train, validation and test sets; StackOverflow's
  element structure; the vocabulary is a, b, c.
  """
  element_spec = collections.OrderedDict(
      (key, tf.TensorSpec([], tf.int64 if key == 'score' else tf.string))
      for key in ('creation_date', 'score', 'tags', 'title', 'tokens', 'type')
  )
  columns = {
      user: dict(
          creation_date=[''] * len(texts),
          score=[0] * len(texts),
          tags=[''] * len(texts),
          title=[''] * len(texts),
          tokens=list(texts),
          type=[''] * len(texts),
      )
      for user, texts in posts.items()
  }
  parsed = _sql_client_data(
      str(tmp_path / 'stackoverflow.sqlite'), columns, element_spec
  )
  stackoverflow = tff.simulation.datasets.stackoverflow
  monkeypatch.setattr(
      stackoverflow, 'load_data', lambda **kwargs: (parsed, parsed, parsed)
  )
  monkeypatch.setattr(
      stackoverflow,
      'load_word_counts',
      lambda **kwargs: collections.OrderedDict(a=3, b=2, c=1),
  )


def test_stackoverflow_training_data_is_built_by_id_in_the_workers(
    tmp_path, monkeypatch
):
  # Two users with one post each.
  _stackoverflow_posts(tmp_path, monkeypatch, {'u0': ['a c zz'], 'u1': ['b b']})
  task = registry.create_task('stackoverflow', batch_size=2, cache_dir='unused')

  # A query per id: the workers build the datasets, no bundle is written.
  assert client_data_bundle.builds_datasets_from_ids(task.train_data)
  dataset_computation = task.train_data.preprocess(
      task.preprocess_fn
  ).dataset_computation
  (batch,) = list(dataset_computation('u0'))  # Built in the worker.
  # TFF's word ids for the vocabulary [a, b, c]: pad 0, a b c 1 2 3, the
  # out-of-vocabulary bucket 4 (zz), beginning 5, end 6; a post is padded to
  # 21 ids, x its first 20 and y its last 20.
  ids = np.zeros([1, 21], np.int64)
  ids[0, :5] = [5, 1, 3, 4, 6]
  np.testing.assert_array_equal(batch[0], ids[:, :-1])
  np.testing.assert_array_equal(batch[1], ids[:, 1:])


# TFF's word ids of a, b, c: 1, 2, 3 (beginning 5 first).
_POST_IDS = {'a': 1, 'b': 2, 'c': 3}


def test_stackoverflow_shuffle_buffer_of_one_keeps_the_posts_order(
    tmp_path, monkeypatch
):
  # Six one-word posts: a shuffle would keep their order 1 time in 720.
  texts = ['a', 'b', 'c', 'c', 'b', 'a']
  _stackoverflow_posts(tmp_path, monkeypatch, {'u0': texts})
  task = registry.create_task(
      'stackoverflow', batch_size=6, cache_dir='unused', shuffle_buffer=1
  )
  (batch,) = list(
      task.preprocess_fn(task.train_data.create_tf_dataset_for_client('u0'))
  )
  np.testing.assert_array_equal(
      batch[0].numpy()[:, 1], [_POST_IDS[t] for t in texts]
  )


@pytest.mark.parametrize('test_batches, expected', [(0, 3), (2, 2), (100, 3)])
def test_stackoverflow_test_batches_cut_the_test_set(
    tmp_path, monkeypatch, test_batches, expected
):
  # 150 posts in TFF's eval batches of 64 (its default eval ClientSpec in
  # word_prediction_tasks.py): ceil(150 / 64) = 3 batches, of which the
  # first `test_batches` (0: all).
  _stackoverflow_posts(tmp_path, monkeypatch, {'u0': ['a b'] * 150})
  task = registry.create_task(
      'stackoverflow',
      batch_size=2,
      cache_dir='unused',
      stackoverflow_test_batches=test_batches,
  )
  assert len(list(task.test_data)) == expected


def test_stackoverflow_test_set_in_client_order_with_its_clients(
    tmp_path, monkeypatch
):
  # User uk has 30 posts of k + 1 words; TFF's eval batches hold 64 posts.
  # Two batches (128 posts): all of u0..u3 (ids in order), then 8 of u4.
  # TFF's centralized test data draws the client order unseeded: it would
  # keep this one 1 time in 720.
  _stackoverflow_posts(
      tmp_path,
      monkeypatch,
      {f'u{k}': [' '.join(['a'] * (k + 1))] * 30 for k in (3, 1, 5, 0, 4, 2)},
  )
  task = registry.create_task(
      'stackoverflow',
      batch_size=2,
      cache_dir='unused',
      stackoverflow_test_batches=2,
      eval_per_client=True,
  )

  x = np.concatenate([x.numpy() for x, _ in task.test_data])
  # A post of n words: beginning, n word ids, end; then padding (0).
  np.testing.assert_array_equal(
      np.count_nonzero(x, axis=1),
      np.repeat([3, 4, 5, 6, 7], [30, 30, 30, 30, 8]),
  )
  assert task.test_clients.client_ids == ('u0', 'u1', 'u2', 'u3', 'u4')
  np.testing.assert_array_equal(
      task.test_clients.example_client, np.repeat(range(5), [30] * 4 + [8])
  )
