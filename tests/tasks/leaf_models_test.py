"""Tests for tff_fedwin.tasks.leaf_models: LEAF's models, layer by layer."""

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.tasks import leaf_models


def test_sent140_lstm_sizes():
  # LEAF's models/sent140/stacked_lstm.py, n_hidden 100, 2 classes, V words:
  # embedding (V + 1) x 100; two LSTMs of 4 gates x 100 x (100 inputs + 100
  # recurrent + 1 bias) = 80,400 each; dense 100 -> 128: 12,928; dense
  # 128 -> 2: 258. V = 50: 5,100 + 160,800 + 12,928 + 258 = 179,086.
  model = leaf_models.sent140_stacked_lstm(50, 25, 2, seed=0)
  assert model.count_params() == 179_086
  assert [w.shape for w in model.weights[:1]] == [(51, 100)]
  logits = model(tf.constant([[50] * 25, list(range(25))], tf.int32))
  assert logits.shape == (2, 2)
  assert not model.non_trainable_weights


def test_celeba_cnn_sizes():
  # LEAF's models/celeba/cnn.py on 84x84x3: conv 3x3x3 -> 32 (896), three
  # conv 3x3x32 -> 32 (9,248 each), four normalizations' gamma and beta
  # (64 each), 'same' pools 84 -> 42 -> 21 -> 11 -> 6, dense 6*6*32 = 1152
  # -> 2 (2,306): 896 + 27,744 + 256 + 2,306 = 31,202.
  model = leaf_models.celeba_cnn(84, 2, seed=0)
  assert model.count_params() == 31_202
  assert not model.non_trainable_weights
  assert model(tf.zeros([1, 84, 84, 3])).shape == (1, 2)


@pytest.mark.parametrize('training', [True, False])
def test_batch_stats_normalization_is_leafs_training_batch_norm(training):
  # tf.layers.batch_normalization(x, training=True): the batch's mean and
  # biased variance over all axes but the channels, epsilon 1e-3; LEAF
  # evaluates with training=True too, so inference normalizes the same way.
  rng = np.random.default_rng(0)
  x = rng.normal(3.0, 2.0, size=(4, 5, 5, 3)).astype(np.float32)
  layer = leaf_models.BatchStatsNormalization()
  layer.build(x.shape)
  gamma = np.array([0.5, 1.0, 2.0], np.float32)
  beta = np.array([-1.0, 0.0, 1.0], np.float32)
  layer.set_weights([gamma, beta])
  mean = x.mean(axis=(0, 1, 2))
  variance = ((x - mean) ** 2).mean(axis=(0, 1, 2))
  expected = gamma * (x - mean) / np.sqrt(variance + 1e-3) + beta
  np.testing.assert_allclose(
      layer(x, training=training).numpy(), expected, rtol=1e-5, atol=1e-5
  )


def test_reddit_lstm_sizes():
  # LEAF's models/reddit/stacked_lstm.py, n_hidden 256, 2 layers, V ids:
  # embedding V x 256; each LSTM 4 gates x 256 x (256 + 256) weights + 4 x
  # 256 biases = 525,312; softmax 256 x V + V. V = 30: 7,680 + 1,050,624 +
  # 7,710 = 1,066,014. Every variable starts in [-0.1, 0.1].
  model = leaf_models.reddit_stacked_lstm(30, 10, seed=0)
  assert model.count_params() == 1_066_014
  assert all(np.abs(w.numpy()).max() <= 0.1 for w in model.weights)
  assert model(tf.zeros([2, 10], tf.int32)).shape == (2, 10, 30)
