"""Tests for tff_fedwin.losses.wsm against numpy arithmetic from the paper.

Reference values follow Legate et al., "Re-weighted softmax cross-entropy to
control forgetting in federated learning", Eq. 2-4, computed here in float64
numpy, independently of the code under test. Per example with logits z, label y
and client class proportions beta:

  l(z, y) = -log softmax_beta(z)_y,
  softmax_beta(z)_j = beta_j e^{z_j} / sum_k beta_k e^{z_k},

where classes with beta_k = 0 simply drop out of the sum (the limit of
log beta_k -> -inf).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin import losses

# (num_classes, classes with proportion 0, seed)
_CONFIGS = [
    (2, (), 0),
    (5, (), 1),
    (5, (3,), 2),
    (10, (0, 4, 7, 9), 3),
    (62, tuple(range(10, 62)), 4),
]
_CONFIG_IDS = [f'C{c}-masked{len(m)}' for c, m, _ in _CONFIGS]


def _random_client(num_classes, masked_classes, seed, batch_size=16, scale=3.0):
  """Random logits [batch, C], labels of present classes, and beta [C]."""
  rng = np.random.default_rng(seed)
  counts = rng.integers(1, 50, size=num_classes).astype(np.float64)
  counts[list(masked_classes)] = 0.0
  beta = counts / counts.sum()
  present = np.flatnonzero(beta > 0)
  labels = rng.choice(present, size=batch_size)
  logits = scale * rng.standard_normal((batch_size, num_classes))
  return logits.astype(np.float32), labels.astype(np.int32), beta


def _np_log_softmax_beta(logits, beta):
  """log softmax_beta(z) of Eq. 4 in float64; -inf for classes with beta 0.

  log softmax_beta(z)_j = z_j + log beta_j - log sum_{k: beta_k > 0}
  exp(z_k + log beta_k), with the log-sum-exp shifted by its maximum so that
  |z| = 1e4 does not overflow.

  Args:
    logits: [batch, C] array.
    beta: [C] array of class proportions.

  Returns:
    [batch, C] float64 array.
  """
  z = np.asarray(logits, np.float64)
  beta = np.asarray(beta, np.float64)
  present = beta > 0
  shifted = z[:, present] + np.log(beta[present])
  top = shifted.max(axis=1, keepdims=True)
  log_denominator = top + np.log(
      np.exp(shifted - top).sum(axis=1, keepdims=True)
  )
  result = np.full(z.shape, -np.inf)
  result[:, present] = shifted - log_denominator
  return result


def _np_wsm_loss(logits, labels, beta):
  """-log softmax_beta(z)_y, shape [batch]."""
  log_probs = _np_log_softmax_beta(logits, beta)
  return -log_probs[np.arange(len(labels)), labels]


def _np_wsm_gradient(logits, labels, beta):
  """d l / d z of the WSM loss (paper Eq. 4), shape [batch, C].

  With l = -z_y - log beta_y + log sum_k beta_k e^{z_k} (our loss; Eq. 4's
  per-example term without the constant -log beta_y):

    dl/dz_j = -[j == y] + beta_j e^{z_j} / sum_k beta_k e^{z_k}
            = softmax_beta(z)_j - onehot(y)_j.

  Classes with beta_j = 0 get softmax_beta(z)_j = 0: no gradient at all.
  """
  probs = np.exp(_np_log_softmax_beta(logits, beta))
  onehot = np.eye(np.shape(logits)[1])[labels]
  return probs - onehot


def _loss_and_gradient(labels, logits, beta):
  logits = tf.constant(logits)
  with tf.GradientTape() as tape:
    tape.watch(logits)
    loss = losses.wsm_cross_entropy(labels, logits, beta)
  return loss.numpy(), tape.gradient(loss, logits).numpy()


@pytest.mark.parametrize('num_classes,masked,seed', _CONFIGS, ids=_CONFIG_IDS)
def test_loss_matches_numpy_reweighted_softmax(num_classes, masked, seed):
  logits, labels, beta = _random_client(num_classes, masked, seed)
  loss = losses.wsm_cross_entropy(labels, logits, beta.astype(np.float32))
  assert loss.shape == (len(labels),)
  assert loss.dtype == tf.float32
  np.testing.assert_allclose(
      loss.numpy(), _np_wsm_loss(logits, labels, beta), rtol=1e-5, atol=1e-5
  )


def test_loss_accepts_labels_of_shape_batch_by_one():
  logits, labels, beta = _random_client(10, (2, 5), seed=5)
  loss = losses.wsm_cross_entropy(labels[:, np.newaxis], logits, beta)
  np.testing.assert_allclose(
      loss.numpy(), _np_wsm_loss(logits, labels, beta), rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize('num_classes,masked,seed', _CONFIGS, ids=_CONFIG_IDS)
def test_gradient_matches_numpy_eq4_gradient(num_classes, masked, seed):
  logits, labels, beta = _random_client(num_classes, masked, seed)
  _, gradient = _loss_and_gradient(labels, logits, beta.astype(np.float32))
  np.testing.assert_allclose(
      gradient, _np_wsm_gradient(logits, labels, beta), rtol=1e-5, atol=1e-6
  )


@pytest.mark.parametrize(
    'num_classes,masked,seed',
    [config for config in _CONFIGS if config[1]],
    ids=[i for i, config in zip(_CONFIG_IDS, _CONFIGS) if config[1]],
)
def test_gradient_of_masked_classes_is_exactly_zero(num_classes, masked, seed):
  logits, labels, beta = _random_client(num_classes, masked, seed)
  _, gradient = _loss_and_gradient(labels, logits, beta.astype(np.float32))
  np.testing.assert_array_equal(gradient[:, list(masked)], 0.0)


@pytest.mark.parametrize(
    'num_classes,present_class', [(2, 0), (10, 3), (62, 61)]
)
def test_one_class_client_has_exactly_zero_loss_and_gradient(
    num_classes, present_class
):
  # beta = onehot(c): softmax_beta(z) = onehot(c) for any z, so with y = c the
  # loss -log 1 = 0 and the gradient onehot(c) - onehot(c) = 0.
  rng = np.random.default_rng(num_classes)
  logits = (5.0 * rng.standard_normal((8, num_classes))).astype(np.float32)
  labels = np.full(8, present_class, np.int32)
  beta = np.eye(num_classes, dtype=np.float32)[present_class]
  loss, gradient = _loss_and_gradient(labels, logits, beta)
  np.testing.assert_array_equal(loss, 0.0)
  np.testing.assert_array_equal(gradient, 0.0)


# Logits of magnitude 1e4 with mixed signs; in each row a masked class holds
# the largest logit, so a wrong mask would dominate the softmax.
_EXTREME_LOGITS = np.array(
    [
        [1e4, -1e4, 1e4, -1e4, 1e4],
        [-1e4, 1e4, -1e4, 1e4, -1e4],
        [1e4, -1e4, -1e4, -1e4, 1e4],
        [-1e4, -1e4, 1e4, 1e4, -1e4],
    ],
    np.float32,
)
_EXTREME_BETA = np.array([0.0, 0.25, 0.0, 0.6, 0.15])


@pytest.mark.parametrize('labels', [[1, 3, 4, 3], [3, 1, 1, 4], [4, 4, 1, 1]])
def test_extreme_logits_give_finite_loss_matching_numpy(labels):
  labels = np.array(labels, np.int32)
  loss, _ = _loss_and_gradient(
      labels, _EXTREME_LOGITS, _EXTREME_BETA.astype(np.float32)
  )
  assert np.all(np.isfinite(loss))
  # float32 logits of 1e4 carry log(beta) to about 1e-3 absolute.
  np.testing.assert_allclose(
      loss,
      _np_wsm_loss(_EXTREME_LOGITS, labels, _EXTREME_BETA),
      rtol=1e-6,
      atol=1e-2,
  )


@pytest.mark.parametrize('labels', [[1, 3, 4, 3], [3, 1, 1, 4], [4, 4, 1, 1]])
def test_extreme_logits_give_finite_gradient_matching_numpy(labels):
  labels = np.array(labels, np.int32)
  _, gradient = _loss_and_gradient(
      labels, _EXTREME_LOGITS, _EXTREME_BETA.astype(np.float32)
  )
  assert np.all(np.isfinite(gradient))
  np.testing.assert_allclose(
      gradient,
      _np_wsm_gradient(_EXTREME_LOGITS, labels, _EXTREME_BETA),
      atol=2e-3,
  )


def test_label_of_masked_class_gives_finite_loss_and_gradient():
  # Impossible for a client's own data; it must still not produce NaN or inf.
  loss, gradient = _loss_and_gradient(
      np.array([0, 2, 0, 2], np.int32),
      _EXTREME_LOGITS,
      _EXTREME_BETA.astype(np.float32),
  )
  assert np.all(np.isfinite(loss))
  assert np.all(np.isfinite(gradient))


@pytest.mark.parametrize('num_classes,seed', [(2, 10), (10, 11), (62, 12)])
def test_equal_proportions_reduce_to_plain_cross_entropy(num_classes, seed):
  # beta_c = 1/C: softmax_beta(z) = softmax(z), so Eq. 4 reduces to Eq. 2.
  logits, labels, _ = _random_client(num_classes, (), seed)
  beta = np.full(num_classes, 1.0 / num_classes, np.float32)
  z = logits.astype(np.float64)
  log_softmax = z - np.log(np.exp(z).sum(axis=1, keepdims=True))  # Eq. 2.
  plain_cross_entropy = -log_softmax[np.arange(len(labels)), labels]
  loss = losses.wsm_cross_entropy(labels, logits, beta)
  np.testing.assert_allclose(
      loss.numpy(), plain_cross_entropy, rtol=1e-5, atol=1e-5
  )


# Class proportions from a dataset.

_LABELS = np.array([0, 3, 3, 1, 3, 0, 4, 3, 1, 0, 3], np.int64)
_NUM_CLASSES = 6  # Class 2 and 5 are absent.


def _labels_dataset(labels, structure, label_shape, batch_size=4):
  labels = np.asarray(labels, np.int64)
  if label_shape == 'batch_by_one':
    labels = labels[:, np.newaxis]
  features = np.zeros((len(labels), 2), np.float32)
  if structure == 'dict':
    elements = {'x': features, 'y': labels}
  elif structure == 'ordered_dict':
    elements = collections.OrderedDict(x=features, y=labels)
  else:
    elements = (features, labels)
  return tf.data.Dataset.from_tensor_slices(elements).batch(batch_size)


def _np_class_proportions(labels, num_classes):
  # beta_c = n_c / n (paper Eq. 4).
  return np.bincount(labels, minlength=num_classes) / len(labels)


def _class_proportions(labels, source, label_shape='batch'):
  """beta of `labels` from a dataset of `source` structure, or from labels."""
  if source == 'labels':
    labels = np.asarray(labels, np.int64)
    if label_shape == 'batch_by_one':
      labels = labels[:, np.newaxis]
    return losses.class_proportions_from_labels(
        tf.constant(labels), _NUM_CLASSES
    )
  dataset = _labels_dataset(labels, source, label_shape)
  return losses.class_proportions_from_dataset(dataset, _NUM_CLASSES)


@pytest.mark.parametrize('label_shape', ['batch', 'batch_by_one'])
@pytest.mark.parametrize('source', ['dict', 'ordered_dict', 'tuple', 'labels'])
def test_class_proportions_match_numpy(source, label_shape):
  proportions = _class_proportions(_LABELS, source, label_shape)
  assert proportions.shape == (_NUM_CLASSES,)
  assert proportions.dtype == tf.float32
  np.testing.assert_allclose(
      proportions.numpy(),
      _np_class_proportions(_LABELS, _NUM_CLASSES),
      rtol=1e-6,
  )


def test_class_proportions_use_label_key():
  labels = np.array([1, 1, 0], np.int32)
  dataset = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(pixels=np.zeros((3, 2), np.float32), label=labels)
  ).batch(2)
  proportions = losses.class_proportions_from_dataset(
      dataset, 3, label_key='label'
  )
  np.testing.assert_allclose(
      proportions.numpy(), _np_class_proportions(labels, 3), rtol=1e-6
  )


@pytest.mark.parametrize('source', ['dict', 'tuple', 'labels'])
def test_class_proportions_of_no_labels_are_zeros(source):
  proportions = _class_proportions(_LABELS[:0], source)
  np.testing.assert_array_equal(proportions.numpy(), np.zeros(_NUM_CLASSES))


def test_class_proportions_inside_tf_function():
  @tf.function
  def proportions_fn(dataset):
    return losses.class_proportions_from_dataset(dataset, _NUM_CLASSES)

  dataset = _labels_dataset(_LABELS, 'ordered_dict', 'batch')
  np.testing.assert_allclose(
      proportions_fn(dataset).numpy(),
      _np_class_proportions(_LABELS, _NUM_CLASSES),
      rtol=1e-6,
  )


# Out-of-range labels.

_BAD_LABELS = [-1, 5, 7]  # With 5 classes.


def _out_of_range_pattern(num_classes):
  return rf'out of range.*num_classes = {num_classes}'


@pytest.mark.parametrize('bad_label', _BAD_LABELS)
def test_loss_rejects_out_of_range_labels(bad_label):
  labels = tf.constant([0, bad_label, 1])
  with pytest.raises(
      tf.errors.InvalidArgumentError, match=_out_of_range_pattern(5)
  ):
    losses.wsm_cross_entropy(labels, tf.zeros([3, 5]), tf.fill([5], 0.2))


@pytest.mark.parametrize(
    'num_classes_dim', [5, None], ids=['static', 'dynamic']
)
@pytest.mark.parametrize('bad_label', _BAD_LABELS)
def test_loss_rejects_out_of_range_labels_inside_tf_function(
    bad_label, num_classes_dim
):
  @tf.function(
      input_signature=[
          tf.TensorSpec([None], tf.int32),
          tf.TensorSpec([None, num_classes_dim], tf.float32),
      ]
  )
  def loss_fn(labels, logits):
    return losses.wsm_cross_entropy(labels, logits, tf.fill([5], 0.2))

  with pytest.raises(
      tf.errors.InvalidArgumentError, match=_out_of_range_pattern(5)
  ):
    loss_fn(tf.constant([0, bad_label, 1]), tf.zeros([3, 5]))


@pytest.mark.parametrize('source', ['dataset', 'labels'])
@pytest.mark.parametrize('bad_label', _BAD_LABELS)
def test_class_proportions_reject_out_of_range_labels(bad_label, source):
  labels = [0, 1, bad_label, 2]
  with pytest.raises(
      tf.errors.InvalidArgumentError, match=_out_of_range_pattern(5)
  ):
    if source == 'dataset':
      dataset = _labels_dataset(labels, 'dict', 'batch', batch_size=2)
      losses.class_proportions_from_dataset(dataset, 5)
    else:
      losses.class_proportions_from_labels(tf.constant(labels), 5)
