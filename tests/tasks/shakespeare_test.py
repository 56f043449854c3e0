"""Tests for tff_fedwin.tasks.shakespeare: character LSTM, masked loss, spec.

Losses and accuracies are checked against numpy: log-softmax cross-entropy and
arg-max hits averaged over the positions whose target is not padding.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.data import shakespeare as shakespeare_data
from tff_fedwin.tasks import shakespeare

_VOCAB = shakespeare_data.VOCAB_SIZE
_SEQ = 20


def _batch(seq_length=_SEQ):
  """Three examples; the last ends in padding."""
  x, y = shakespeare_data.lines_to_sequences(
      ['To be, or not to be: that is the question:', 'Ay, there'],
      seq_length=seq_length,
  )
  assert x.shape[0] == 3 and (x[-1] == 0).any()
  return collections.OrderedDict(x=x, y=y)


def _log_probs(logits):
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _masked_cross_entropy(logits, y, weights=None):
  """Mean of -log softmax(logits)[y] over positions where y is not padding."""
  picked = np.take_along_axis(_log_probs(logits), y[..., None], axis=-1)[..., 0]
  mask = (y != 0).astype(np.float64)
  if weights is not None:
    mask = mask * weights
  return -(picked * mask).sum() / mask.sum()


def _masked_accuracy(logits, y):
  mask = y != 0
  return (logits.argmax(axis=-1) == y)[mask].mean()


def _num_params(model):
  return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def test_output_is_logits_per_position():
  model = shakespeare.create_char_model(_VOCAB, seq_length=_SEQ)
  logits = model(_batch()['x'])
  assert logits.shape == (3, _SEQ, _VOCAB)
  assert logits.dtype == tf.float32
  # Logits, not probabilities: rows do not sum to one.
  assert not np.allclose(tf.reduce_sum(logits, axis=-1), 1.0)


def test_default_is_one_small_lstm_layer():
  model = shakespeare.create_char_model(_VOCAB, seq_length=_SEQ)
  embed, units = 8, 128
  expected = (
      _VOCAB * embed + 4 * units * (embed + units + 1) + units * _VOCAB + _VOCAB
  )
  assert _num_params(model) == expected == 83_707


def test_baseline_shape_two_lstm_layers_of_256():
  model = shakespeare.create_char_model(
      _VOCAB, lstm_units=256, num_lstm_layers=2, seq_length=80
  )
  expected = (
      _VOCAB * 8
      + 4 * 256 * (8 + 256 + 1)
      + 4 * 256 * (256 + 256 + 1)
      + 256 * _VOCAB
      + _VOCAB
  )
  assert _num_params(model) == expected
  assert model.output_shape == (None, 80, _VOCAB)


def test_same_seed_same_weights_other_seed_differs():
  weights = lambda seed: shakespeare.create_char_model(
      _VOCAB, seq_length=_SEQ, seed=seed
  ).get_weights()
  for a, b in zip(weights(3), weights(3)):
    np.testing.assert_array_equal(a, b)
  assert not np.array_equal(weights(3)[0], weights(4)[0])


def test_batch_has_padded_targets_exactly_after_padded_inputs():
  batch = _batch()
  # Padding follows the final EOS only: pad inputs <=> pad targets, plus the
  # one target right after the final EOS.
  x_pad, y_pad = batch['x'] == 0, batch['y'] == 0
  assert y_pad.sum() == x_pad.sum() + 1
  assert np.all(y_pad[x_pad])


def test_masked_loss_averages_over_real_targets():
  batch = _batch()
  logits = shakespeare.create_char_model(_VOCAB, seq_length=_SEQ)(batch['x'])
  logits = logits.numpy()
  loss = shakespeare.MaskedSparseCategoricalCrossentropy()
  np.testing.assert_allclose(
      loss(batch['y'], logits),
      _masked_cross_entropy(logits, batch['y']),
      rtol=1e-6,
  )
  # The stock loss also averages over the padded targets: it differs.
  stock = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  assert (
      abs(
          float(stock(batch['y'], logits))
          - _masked_cross_entropy(logits, batch['y'])
      )
      > 1e-4
  )
  # Per-example sample weights scale each example's real targets.
  weights = np.array([1.0, 0.0, 2.0])
  np.testing.assert_allclose(
      loss(batch['y'], logits, sample_weight=weights),
      _masked_cross_entropy(logits, batch['y'], weights[:, None]),
      rtol=1e-6,
  )
  assert float(loss(np.zeros([2, _SEQ], np.int32), logits[:2])) == 0.0


def test_masked_accuracy_counts_real_targets_only():
  rng = np.random.default_rng(0)
  y = np.array([[5, 7, 0, 0], [9, 0, 0, 0]], np.int32)
  logits = rng.normal(size=[2, 4, _VOCAB]).astype(np.float32)
  logits[0, 0, 5] = logits[1, 0, 9] = 100.0  # two hits of three real targets
  logits[0, 1, 8] = 100.0
  logits[0, 2:, 0] = logits[1, 1:, 0] = 100.0  # "hits" on padding: ignored
  metric = shakespeare.MaskedSparseCategoricalAccuracy()
  metric.update_state(y, logits)
  np.testing.assert_allclose(metric.result(), 2 / 3, rtol=1e-6)
  np.testing.assert_allclose(metric.result(), _masked_accuracy(logits, y))
  rebuilt = type(metric).from_config(metric.get_config())
  assert rebuilt.get_config() == metric.get_config()


def test_input_spec():
  spec = shakespeare.shakespeare_input_spec(_SEQ)
  assert list(spec) == ['x', 'y']
  for value in spec.values():
    assert value == tf.TensorSpec([None, _SEQ], tf.int32)


def test_tff_forward_pass_on_a_batch():
  batch = _batch()
  keras_model = shakespeare.create_char_model(_VOCAB, seq_length=_SEQ)
  model = tff.learning.models.from_keras_model(
      keras_model,
      loss=shakespeare.MaskedSparseCategoricalCrossentropy(),
      input_spec=shakespeare.shakespeare_input_spec(_SEQ),
      metrics=[shakespeare.MaskedSparseCategoricalAccuracy()],
  )
  output = model.forward_pass(batch, training=False)
  logits = output.predictions.numpy()
  assert logits.shape == (3, _SEQ, _VOCAB)
  np.testing.assert_allclose(logits, keras_model(batch['x']), rtol=1e-6)
  assert int(output.num_examples) == 3
  np.testing.assert_allclose(
      output.loss, _masked_cross_entropy(logits, batch['y']), rtol=1e-6
  )
  metrics = model.report_local_unfinalized_metrics()
  total, count = metrics['masked_sparse_categorical_accuracy']
  assert count == (batch['y'] != 0).sum()
  assert total == (logits.argmax(-1) == batch['y'])[batch['y'] != 0].sum()


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(vocab_size=0), '`vocab_size` must be an integer >= 1, got 0'),
        (
            dict(vocab_size=_VOCAB, lstm_units=0),
            '`lstm_units` must be an integer >= 1, got 0',
        ),
        (
            dict(vocab_size=_VOCAB, num_lstm_layers=0),
            '`num_lstm_layers` must be an integer >= 1, got 0',
        ),
        (
            dict(vocab_size=_VOCAB, seq_length=1.5),
            r'`seq_length` must be an integer >= 1, got 1\.5',
        ),
    ],
)
def test_bad_arguments_raise(kwargs, message):
  with pytest.raises(ValueError, match=message):
    shakespeare.create_char_model(**kwargs)
