"""Tests for tff_fedwin.tasks.leaf: the `Task` of a LEAF directory."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests.data import leaf_fixtures
from tff_fedwin.data import leaf as leaf_data
from tff_fedwin.tasks import image_models
from tff_fedwin.tasks import leaf


def _task(root, tmp_path, **kwargs):
  kwargs = {'batch_size': 2, 'epochs': 1, 'seed': 0, **kwargs}
  return leaf.leaf_task(root, cache_dir=str(tmp_path / 'cache'), **kwargs)


def _generated_task(name, tmp_path, **kwargs):
  """The task of a directory written by LEAF's scripts (leaf_generated)."""
  return leaf.leaf_task(
      os.path.join(leaf_fixtures.GENERATED_DIR, name),
      batch_size=4,
      epochs=1,
      seed=0,
      cache_dir=str(tmp_path),
      **kwargs,
  )


def _num_params(task):
  model = task.model_fn()
  return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


@pytest.fixture
def femnist(tmp_path):
  return leaf_fixtures.femnist_by_sample(tmp_path / 'leaf')


@pytest.fixture
def shakespeare(tmp_path):
  return leaf_fixtures.shakespeare_by_user(tmp_path / 'leaf')


def test_femnist_task_shapes_and_default_model(femnist, tmp_path):
  task = _task(femnist[0], tmp_path)
  assert task.name == 'leaf' and task.num_classes == 62
  assert task.pad_label is None
  assert task.train_data.DATASETS_FROM_IDS
  batch = next(
      iter(
          task.preprocess_fn(
              task.train_data.create_tf_dataset_for_client('f0001_07')
          )
      )
  )
  assert batch['x'].shape == (2, 28, 28, 1) and batch['y'].dtype == tf.int32
  test = next(iter(task.test_data))
  assert test['x'].shape == (4, 28, 28, 1)
  np.testing.assert_array_equal(test['y'], [61, 0, 3, 4])
  # cnn_dropout: conv 3x3x1x32 + 32 = 320, conv 3x3x32x64 + 64 = 18,496,
  # dense 12*12*64*128 + 128 = 1,179,776, dense 128*62 + 62 = 7,998.
  assert _num_params(task) == 320 + 18_496 + 1_179_776 + 7_998


def test_femnist_task_takes_leafs_cnn(femnist, tmp_path):
  task = _task(femnist[0], tmp_path, model='leaf_cnn')
  # LEAF's CNN: conv 5x5x1x32 + 32 = 832, conv 5x5x32x64 + 64 = 51,264,
  # dense 7*7*64*2048 + 2048 = 6,424,576, dense 2048*62 + 62 = 127,038.
  assert _num_params(task) == 832 + 51_264 + 6_424_576 + 127_038


def test_unknown_model_is_one_line(femnist, tmp_path):
  with pytest.raises(image_models.ImageModelError, match=r'--model must be'):
    _task(femnist[0], tmp_path, model='vgg')


def test_shakespeare_task_scores_the_last_position(shakespeare, tmp_path):
  task = _task(shakespeare[0], tmp_path)
  assert task.num_classes == leaf_data.SHAKESPEARE_VOCAB_SIZE == 81
  assert task.pad_label == 0
  assert task.train_data.DATASETS_FROM_IDS
  dataset = task.train_data.create_tf_dataset_for_client('THE_TEMPEST_PROSPERO')
  elements = list(dataset.as_numpy_iterator())
  # LEAF's next characters 'b' (55) and '\n' (1) at the last position.
  y = np.stack([e['y'] for e in elements])
  np.testing.assert_array_equal(y[:, :79], np.zeros([2, 79]))
  np.testing.assert_array_equal(y[:, 79], [55, 1])
  # What the workers build from the id: HAMLET_HAMLET's '}' (80) last.
  (element,) = list(task.train_data.dataset_computation('HAMLET_HAMLET'))
  np.testing.assert_array_equal(element['y'], [0] * 79 + [80])
  np.testing.assert_array_equal(element['x'], [26] * 79 + [80])
  test = next(iter(task.test_data))
  assert test['x'].shape == (1, 80) and test['y'][0, 79] == 2  # ' '
  model = task.model_fn()
  out = model.forward_pass(test, training=False)
  assert out.predictions.shape == (1, 80, 81)


def test_shakespeare_loss_and_accuracy_are_leafs(shakespeare, tmp_path):
  # The masked loss of the whole sequence equals the plain cross-entropy of
  # the last position's logits alone (numpy), LEAF's one-character loss.
  task = _task(shakespeare[0], tmp_path)
  batch = next(iter(task.test_data))
  model = task.model_fn()
  out = model.forward_pass(batch, training=False)
  logits = out.predictions.numpy()[0, 79].astype(np.float64)
  lse = logits.max() + np.log(np.sum(np.exp(logits - logits.max())))
  np.testing.assert_allclose(out.loss, lse - logits[2], rtol=1e-5)
  # Accuracy: 1 if the last position's arg-max is ' ' (2), else 0.
  metrics = model.report_local_unfinalized_metrics()
  assert list(metrics['accuracy']) == [float(logits.argmax() == 2), 1.0]


def test_model_for_shakespeare_data_is_one_line(shakespeare, tmp_path):
  with pytest.raises(
      leaf.LeafDataError,
      match=r'--model=cnn applies to FEMNIST-style LEAF data only',
  ):
    _task(shakespeare[0], tmp_path, model='cnn')


def _no_tf_work(*args, **kwargs):
  raise AssertionError('TensorFlow work before the checks')


def test_checks_come_before_any_tf_work(tmp_path, monkeypatch):
  root = leaf_fixtures.write_leaf_dir(
      tmp_path / 'leaf',
      {'a.json': {'u1': ([[0.5] * 784], [62])}},
      {'b.json': {'u2': ([[0.5] * 784], [0])}},
  )
  monkeypatch.setattr(leaf.leaf_client_data, 'LeafClientData', _no_tf_work)
  monkeypatch.setattr(leaf.leaf_client_data, 'test_dataset', _no_tf_work)
  match = r"train/a\.json: user 'u1': y\[0\] = 62 is out of range"
  with pytest.raises(leaf.LeafDataError, match=match):
    leaf.check_leaf_dir(root, cache_dir=str(tmp_path / 'cache'))
  with pytest.raises(leaf.LeafDataError, match=match):
    _task(root, tmp_path)


def test_one_local_fedavg_round_runs(femnist, tmp_path):
  task = _task(femnist[0], tmp_path, model='cnn')
  process = tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn,
      client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.01),
  )
  state = process.initialize()
  datasets = [
      task.preprocess_fn(task.train_data.create_tf_dataset_for_client(c))
      for c in task.train_data.client_ids
  ]
  result = process.next(state, datasets)
  train = result.metrics['client_work']['train']
  assert train['num_examples'] == 1 + 3 + 2
  assert np.isfinite(train['loss'])


def test_synthetic_task_is_leafs_logistic_regression(tmp_path):
  # LEAF's log_reg.py: logits = sigmoid(x W + b), softmax cross-entropy over
  # them; computed here in numpy from the model's W and b.
  task = _generated_task('synthetic_sample', tmp_path)
  model = task.model_fn()
  kernel, bias = (v.numpy() for v in model.trainable_variables)
  assert kernel.shape == (10, 3) and bias.shape == (3,)
  np.testing.assert_array_equal(bias, 0.0)
  batch = next(iter(task.test_data))
  x, y = batch['x'].numpy(), batch['y'].numpy()
  logits = 1 / (1 + np.exp(-(x.astype(np.float64) @ kernel + bias)))
  log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
  expected = -log_softmax[np.arange(len(y)), y].mean()
  output = model.forward_pass(batch, training=False)
  np.testing.assert_allclose(output.loss.numpy(), expected, rtol=1e-5)
  with pytest.raises(
      leaf.LeafDataError,
      match=r'Synthetic-style data ' r"\(LEAF's logistic regression\)",
  ):
    leaf.check_leaf_dir(
        os.path.join(leaf_fixtures.GENERATED_DIR, 'synthetic_sample'),
        model='cnn',
        cache_dir=str(tmp_path),
    )


def test_sent140_task_is_leafs_stacked_lstm(tmp_path):
  # LEAF's Sent140 directory (tests/data/leaf_generated): 25 word ids per
  # tweet, 2 classes; the model's size is 100 V + 174,086 for V words (an
  # embedding of V + 1 rows; derived in tests/tasks/leaf_models_test.py).
  task = _generated_task('sent140_sample', tmp_path)
  words = (
      leaf.check_leaf_dir(
          os.path.join(leaf_fixtures.GENERATED_DIR, 'sent140_sample'),
          cache_dir=str(tmp_path),
      ).vocab_size
      - 1
  )  # The ids: the words and the unknown word.
  assert task.num_classes == 2
  assert _num_params(task) == 100 * words + 174_086
  batch = next(iter(task.test_data))
  assert batch['x'].dtype == tf.int32 and batch['x'].shape[1:] == (25,)


@pytest.mark.parametrize(
    'sample, options, match',
    [
        (
            'synthetic_sample',
            leaf.LeafOptions(images_dir='img'),
            r'--leaf_images_dir applies to CelebA-style LEAF data only; this '
            r'directory holds Synthetic-style data',
        ),
        (
            'shakespeare_sample',
            leaf.LeafOptions(vocab_size=5),
            r'--vocab_size applies to Sent140 and Reddit-style LEAF data only; '
            r'this '
            r'directory holds Shakespeare-style data',
        ),
        (
            'sent140_sample',
            leaf.LeafOptions(vocab_file='v.txt', vocab_size=5),
            r'v\.txt: --vocab_size does not apply with --leaf_vocab_file',
        ),
    ],
)
def test_option_of_another_kind_is_one_line(tmp_path, sample, options, match):
  if options.images_dir:
    os.mkdir(tmp_path / options.images_dir)
    options = leaf.LeafOptions(images_dir=str(tmp_path / options.images_dir))
  with pytest.raises(leaf.LeafDataError, match=match):
    leaf.check_leaf_dir(
        os.path.join(leaf_fixtures.GENERATED_DIR, sample),
        cache_dir=str(tmp_path / 'c'),
        options=options,
    )


def test_reddit_task_scores_the_counted_tokens(tmp_path):
  # LEAF's Reddit directory and pickle (tests/data/leaf_generated): 10 ids
  # in and out; the loss is the cross-entropy over the targets that are not
  # <PAD> (id 0), computed here in numpy from the model's logits; the test
  # accuracy leaves <UNK> (id 1) out.
  root = os.path.join(leaf_fixtures.GENERATED_DIR, 'reddit_sample')
  task = _generated_task(
      'reddit_sample',
      tmp_path,
      options=leaf.LeafOptions(
          vocab_file=os.path.join(root, 'vocab', 'reddit_vocab.pck')
      ),
  )
  assert (task.num_classes, task.pad_label, task.accuracy_excluded_labels) == (
      30,
      0,
      (1,),
  )
  assert task.data_kind == 'reddit'
  model = task.model_fn()
  batch = next(iter(task.test_data))
  y = batch['y'].numpy()
  assert y.shape[1:] == (10,) and (y == 0).any() and (y != 0).any()
  output = model.forward_pass(batch, training=False)
  logits = output.predictions.numpy().astype(np.float64)
  log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  rows, cols = np.nonzero(y != 0)
  expected = -log_softmax[rows, cols, y[rows, cols]].mean()
  np.testing.assert_allclose(output.loss.numpy(), expected, rtol=1e-5)


def _ten_class_dir(root, test_labels=(9, 0)):
  """784-float rows whose labels are 0..9 (a 10-class set in LEAF's layout):
  training labels up to 8, the test split decides the 10th."""
  rows = leaf_fixtures.femnist_rows
  train = {
      'train.json': {
          'u0': (rows(5, 1), [0, 1, 2, 3, 4]),
          'u1': (rows(4, 2), [5, 6, 7, 8]),
      }
  }
  test = {'test.json': {'u0': (rows(len(test_labels), 3), list(test_labels))}}
  return leaf_fixtures.write_leaf_dir(root, train, test)


# cnn_dropout's layers before its head (test_femnist_task_shapes_and_default_
# model): 320 + 18,496 + 1,179,776; the head 128 * C + C.
_CNN_DROPOUT_BODY = 320 + 18_496 + 1_179_776


@pytest.mark.parametrize(
    'num_classes, expected', [(0, 10), (12, 12)], ids=['labels', 'flag']
)
def test_class_count_comes_from_the_labels(tmp_path, num_classes, expected):
  task = _task(
      _ten_class_dir(tmp_path / 'leaf'), tmp_path, num_classes=num_classes
  )
  assert task.num_classes == expected
  assert _num_params(task) == _CNN_DROPOUT_BODY + 128 * expected + expected


def test_label_beyond_num_classes_is_one_line(tmp_path):
  with pytest.raises(
      ValueError,
      match=r'--num_classes=9, but the LEAF directory of .* holds '
      r'the label 9: labels must be in \[0, num_classes\)',
  ):
    _task(_ten_class_dir(tmp_path / 'leaf'), tmp_path, num_classes=9)


def test_num_classes_of_a_kind_with_fixed_classes_is_one_line(
    shakespeare, tmp_path
):
  with pytest.raises(
      ValueError,
      match=r'--num_classes sets the classes of FEMNIST- or '
      r'Synthetic-style rows; .* holds shakespeare-style data',
  ):
    _task(shakespeare[0], tmp_path, num_classes=5)
