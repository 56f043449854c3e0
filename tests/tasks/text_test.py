"""Tests for tff_fedwin.tasks.text: the task's data, model, metric, eval."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.data import text_records
from tff_fedwin.tasks import shakespeare
from tff_fedwin.tasks import text

_SAMPLE = os.path.join(
    os.path.dirname(text_records.__file__), 'samples', 'text_sample'
)
# Client a trains on 'x y x', 'y z'; b on 'x'; the test texts are
# 'x w' (a, a word never trained: OOV) and 'y x' (b).
# Training counts x 3, y 2, z 1 -> x=1, y=2, z=3, oov 4, bos 5, eos 6.
_RECORDS = [
    ('a', 'x y x', 'train'),
    ('b', 'x', 'train'),
    ('a', 'y z', 'train'),
    ('a', 'x w', 'test'),
    ('b', 'y x', 'test'),
]


def _fixture(tmp_path):
  path = tmp_path / 'text.jsonl'
  path.write_text(
      ''.join(
          json.dumps(dict(client_id=c, text=t, split=s)) + '\n'
          for c, t, s in _RECORDS
      )
  )
  return str(path)


def _task(path, **kwargs):
  kwargs = dict(
      dict(
          sequence_length=4,
          batch_size=2,
          epochs=1,
          seed=0,
          embedding_size=3,
          lstm_size=4,
      ),
      **kwargs,
  )
  return text.text_task(path, **kwargs)


def test_task_data_by_hand(tmp_path):
  task = _task(_fixture(tmp_path))
  assert task.name == 'text' and task.num_classes == 7
  assert task.pad_label == 0 and task.accuracy_excluded_labels == (4, 6)
  assert task.train_data.client_ids == ['a', 'b']
  spec = task.train_data.element_type_structure
  assert spec['x'] == tf.TensorSpec([4], tf.int32)
  assert spec['y'] == tf.TensorSpec([4], tf.int32)
  a = list(task.train_data.create_tf_dataset_for_client('a'))
  # 'x y x' -> [5, 1, 2, 1, 6]; 'y z' -> [5, 2, 3, 6, 0].
  np.testing.assert_array_equal(
      [e['x'].numpy() for e in a], [[5, 1, 2, 1], [5, 2, 3, 6]]
  )
  np.testing.assert_array_equal(
      [e['y'].numpy() for e in a], [[1, 2, 1, 6], [2, 3, 6, 0]]
  )
  (batch,) = list(task.test_data)
  # 'x w' -> [5, 1, 4, 6, 0]; 'y x' -> [5, 2, 1, 6, 0].
  np.testing.assert_array_equal(batch['x'], [[5, 1, 4, 6], [5, 2, 1, 6]])
  np.testing.assert_array_equal(batch['y'], [[1, 4, 6, 0], [2, 1, 6, 0]])
  batched = next(
      iter(
          task.preprocess_fn(task.train_data.create_tf_dataset_for_client('a'))
      )
  )
  assert batched['x'].shape == (2, 4) and batched['x'].dtype == tf.int32


def test_char_level_task(tmp_path):
  task = _task(_fixture(tmp_path), level='char', sequence_length=3)
  # Training characters x 3, ' ' 2, y 2, z 1: 4 + 4 specials.
  assert task.num_classes == 8
  b = list(task.train_data.create_tf_dataset_for_client('b'))
  # 'x' -> [bos 6, x 1, eos 8 - 1 = 7].
  np.testing.assert_array_equal([e['x'].numpy() for e in b], [[6, 1, 7]])


def test_masked_accuracy_by_hand():
  y = np.array([[1, 2, 5, 7, 0], [3, 3, 1, 0, 0]])
  predicted = np.array([[1, 0, 5, 7, 0], [3, 1, 1, 2, 0]])
  logits = np.eye(8, dtype=np.float32)[predicted]  # One-hot at `predicted`.
  # Leaving out 0, 5, 7: scored (1,1) (2,0) (3,3) (3,1) (1,1) -> 3 / 5.
  metric = shakespeare.MaskedSparseCategoricalAccuracy(0, excluded_ids=(5, 7))
  metric.update_state(y, logits)
  assert metric.result().numpy() == pytest.approx(3 / 5)
  # Pad only: also (5,5) and (7,7), both hits -> 5 / 7.
  metric = shakespeare.MaskedSparseCategoricalAccuracy(0)
  metric.update_state(y, logits)
  assert metric.result().numpy() == pytest.approx(5 / 7)


def _params(model):
  return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def test_model_parameters_are_tffs():
  # TFF's StackOverflow model, 10,000 words + 4 ids, E = 96, H = 670:
  # embedding 10004 * 96 = 960,384; LSTM 4 * 670 * (96 + 670 + 1) =
  # 2,055,560; dense 670 * 96 + 96 = 64,416; logits 96 * 10004 + 10004 =
  # 970,388. Sum 4,050,748, the count Reddi et al. 2021 (Adaptive Federated
  # Optimization, Table 6) give for it.
  model = text.create_recurrent_model(10004, sequence_length=20)
  assert _params(model) == 4050748
  # Two layers, 7 ids, E = 3, H = 2: 21 + 2 * (4*2*6 + 2*3 + 3) + 3*7 + 7.
  model = text.create_recurrent_model(
      7, sequence_length=2, embedding_size=3, lstm_size=2, num_lstm_layers=2
  )
  assert _params(model) == 21 + 2 * 57 + 28


def test_small_text_model_parameters():
  # --text_model=small at 10,004 ids, E = 32, H = 128: embedding 10004 * 32
  # = 320,128; LSTM 4 * 128 * (32 + 128 + 1) = 82,432; dense 128 * 32 + 32 =
  # 4,128; logits 32 * 10004 + 10004 = 330,132. Sum 736,820.
  embedding, lstm = text.TEXT_MODEL_SIZES['small']
  model = text.create_recurrent_model(
      10004, sequence_length=20, embedding_size=embedding, lstm_size=lstm
  )
  assert _params(model) == 736820
  assert text.TEXT_MODEL_SIZES['tff'] == (96, 670)


def _numpy_test_batch(task):
  """(logits, y, cross-entropy per position) of the one test batch, numpy.

  The logits are those of the same model built in Keras (seed 0, the
  fixture's sizes); the cross-entropy is logsumexp(z) - z[y], float64.
  """
  keras_model = text.create_recurrent_model(
      7, sequence_length=4, embedding_size=3, lstm_size=4, seed=0
  )
  (batch,) = list(task.test_data)
  logits = keras_model(batch['x']).numpy().astype(np.float64)
  y = batch['y'].numpy()
  top = logits.max(-1, keepdims=True)
  log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
  ce = log_z - np.take_along_axis(logits, y[..., None], -1)[..., 0]
  return logits, y, ce


def test_evaluation_leaves_out_pad_oov_and_eos(tmp_path):
  task = _task(_fixture(tmp_path), eval_batch_size=8)
  tff_model = task.model_fn()
  weights = tff.learning.models.ModelWeights.from_model(tff_model)
  metrics = task.build_evaluate_fn()(weights)
  logits, y, ce = _numpy_test_batch(task)
  real = y != 0
  # One test batch: the loss is its mean over the 6 non-pad targets.
  assert metrics['loss'] == pytest.approx(ce[real].mean(), rel=1e-5)
  scored = real & (y != 4) & (y != 6)  # Targets 1, 2, 1: three positions.
  assert scored.sum() == 3
  hits = (logits.argmax(-1) == y) & scored
  assert metrics['accuracy'] == pytest.approx(hits.sum() / 3)


def test_each_test_clients_sums_are_numpys_on_its_rows(tmp_path):
  # The test texts: 'x w' of a, 'y x' of b, one example each (word level,
  # sequence_length 4); a's row first, as in the file.
  task = _task(_fixture(tmp_path), eval_batch_size=8)
  assert task.test_clients.client_ids == ('a', 'b')
  np.testing.assert_array_equal(task.test_clients.example_client, [0, 1])
  weights = tff.learning.models.ModelWeights.from_model(task.model_fn())
  _, sums = task.build_evaluate_fn(True).evaluate_all_per_client([weights])
  logits, y, ce = _numpy_test_batch(task)
  real = y != 0
  counted = real & (y != 4) & (y != 6)
  hits = (logits.argmax(-1) == y) & counted
  for row in range(2):
    expected = [
        ce[row][real[row]].sum(),
        real[row].sum(),
        hits[row].sum(),
        counted[row].sum(),
    ]
    np.testing.assert_allclose(sums[row, 0], expected, rtol=1e-5)


def test_sample_task_builds():
  task = _task(_SAMPLE + '.csv')
  assert task.train_data.client_ids == ['alice', 'bob', 'carol', 'dave', 'erin']
  # 5 clients x 6 test records, one example each at word level.
  assert sum(int(b['x'].shape[0]) for b in task.test_data) == 30


def test_bad_file_refused_before_the_model(tmp_path):
  path = tmp_path / 'bad.jsonl'
  path.write_text('{"client_id": "a"}\n')
  with pytest.raises(text_records.TextDataError, match='line 1: missing field'):
    _task(str(path))


@pytest.mark.parametrize(
    'kwargs, match',
    [
        (dict(level='byte'), '`level` must be one of'),
        (dict(vocab_size=0), '`vocab_size` must be an integer >= 1'),
        (dict(batch_size=0), '`batch_size` must be an integer >= 1'),
    ],
)
def test_bad_arguments(tmp_path, kwargs, match):
  with pytest.raises(ValueError, match=match):
    _task(_fixture(tmp_path), **kwargs)
