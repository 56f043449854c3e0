"""Tests for tff_fedwin.algorithms.client_work's WSM client work, against numpy.

The model is a linear softmax classifier z = x @ W + b (a Keras Dense(C) with
fixed initial weights, trained on logits). Expected values come from numpy SGD
written from the WSM paper's equations (below), never from the code under test.

WSM gradient. For one example with logits z, label y and client class
proportions beta (beta_c = n_c / n, WSM Eq. 4):

  l(z, y) = -log(beta_y e^{z_y} / S),   S = sum_k beta_k e^{z_k},
  dl/dz_j = -[j == y] + beta_j e^{z_j} / S =: p_beta_j - onehot(y)_j.

With z = x @ W + b and the batch mean over b examples, the chain rule gives

  dL/dW = x^T (P_beta - Y) / b,   dL/db = sum_rows(P_beta - Y) / b,

P_beta [b, C] holding p_beta_j = beta_j e^{z_j} / sum_k beta_k e^{z_k} per row
and Y the one-hot labels. A class with beta_j = 0 has p_beta_j = 0 exactly.
Plain cross-entropy is the same with P = softmax(z). FedProx (mu / 2)
||w - w_global||^2 adds mu (w - w_global) to each gradient.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_work
from tff_fedwin.algorithms import scheduled_client_work

NUM_CLASSES = 4
INPUT_DIM = 3
LEARNING_RATE = 0.5
KERNEL0 = np.array(
    [[0.2, -0.1, 0.05, 0.3], [-0.3, 0.25, 0.1, -0.05], [0.15, 0.0, -0.2, 0.1]],
    np.float32,
)
BIAS0 = np.array([0.1, -0.2, 0.05, 0.3], np.float32)
NUM_EXAMPLES = tff.learning.ClientWeighting.NUM_EXAMPLES
UNIFORM = tff.learning.ClientWeighting.UNIFORM

# Class 3 is absent (zero proportion); 7 examples.
SKEWED_LABELS = np.array([0, 1, 1, 2, 0, 1, 1], np.int32)
# Another client: class 0 absent, 5 examples.
OTHER_LABELS = np.array([2, 3, 3, 1, 3], np.int32)
# Every class twice: beta = 1/C for all classes.
BALANCED_LABELS = np.array([0, 1, 2, 3, 3, 2, 1, 0], np.int32)


def _features(num_examples, seed):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(num_examples, INPUT_DIM)).astype(np.float32)


# TFF side.


def _make_model_fn(label_shape='flat'):
  """A Dense(C) model on logits; labels of shape [b] or [b, 1]."""
  label_spec_shape = [None] if label_shape == 'flat' else [None, 1]
  input_spec = collections.OrderedDict(
      x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
      y=tf.TensorSpec(label_spec_shape, tf.int32),
  )

  def model_fn():
    keras_model = tf.keras.Sequential(
        [
            tf.keras.layers.Dense(
                NUM_CLASSES,
                kernel_initializer=tf.keras.initializers.Constant(KERNEL0),
                bias_initializer=tf.keras.initializers.Constant(BIAS0),
                input_shape=(INPUT_DIM,),
            )
        ]
    )
    return tff.learning.models.from_keras_model(
        keras_model,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=input_spec,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
    )

  return model_fn


def _dataset(x, labels, batch_size, label_shape='flat'):
  y = labels if label_shape == 'flat' else labels[:, None]
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)
  ).batch(batch_size)


def _initial_weights():
  return tff.learning.models.ModelWeights(
      trainable=[KERNEL0, BIAS0], non_trainable=[]
  )


def _run(process, datasets, learning_rate=LEARNING_RATE):
  """One `next` call; every client starts from (KERNEL0, BIAS0)."""
  state = collections.OrderedDict(learning_rate=np.float32(learning_rate))
  return process.next(state, [_initial_weights()] * len(datasets), datasets)


def _build(model_fn=None, **kwargs):
  return client_work.build_wsm_client_work(
      model_fn or _make_model_fn(),
      tff.learning.optimizers.build_sgdm(LEARNING_RATE),
      num_classes=NUM_CLASSES,
      **kwargs,
  )


# Numpy side (float64).


def _np_class_proportions(labels):
  return np.bincount(labels, minlength=NUM_CLASSES) / len(labels)


def _np_reweighted_softmax(z, beta):
  """p_beta_j = beta_j e^{z_j} / sum_k beta_k e^{z_k}, row-wise."""
  a = beta[None, :] * np.exp(z - z.max(axis=1, keepdims=True))
  return a / a.sum(axis=1, keepdims=True)


def _np_softmax(z):
  return _np_reweighted_softmax(z, np.ones(z.shape[1]))


def _np_client_update(
    x, labels, batch_size, *, loss, learning_rate=LEARNING_RATE, mu=0.0
):
  """SGD over the batches; returns (kernel, bias) deltas = initial - trained.

  `loss` is 'wsm' (beta from all of the client's labels) or 'plain'.
  """
  beta = _np_class_proportions(labels)
  kernel0, bias0 = KERNEL0.astype(np.float64), BIAS0.astype(np.float64)
  kernel, bias = kernel0.copy(), bias0.copy()
  for start in range(0, len(labels), batch_size):
    xb = x[start : start + batch_size].astype(np.float64)
    yb = np.eye(NUM_CLASSES)[labels[start : start + batch_size]]
    z = xb @ kernel + bias
    p = _np_reweighted_softmax(z, beta) if loss == 'wsm' else _np_softmax(z)
    b = len(xb)
    grad_kernel = xb.T @ (p - yb) / b + mu * (kernel - kernel0)
    grad_bias = (p - yb).sum(axis=0) / b + mu * (bias - bias0)
    kernel -= learning_rate * grad_kernel
    bias -= learning_rate * grad_bias
  return kernel0 - kernel, bias0 - bias


def _assert_update_close(update, expected):
  np.testing.assert_allclose(update[0], expected[0], atol=1e-5)
  np.testing.assert_allclose(update[1], expected[1], atol=1e-5)


# Tests.


class TestBuildWsmClientWorkComputation:
  """Type signatures and argument checks."""

  @pytest.mark.parametrize(
      'optimizer,weighting',
      [
          (tff.learning.optimizers.build_sgdm(0.1), NUM_EXAMPLES),
          (tff.learning.optimizers.build_sgdm(0.1, momentum=0.9), UNIFORM),
          (tff.learning.optimizers.build_adam(0.01), NUM_EXAMPLES),
      ],
      ids=['sgd', 'sgdm_uniform', 'adam'],
  )
  def test_type_signatures_equal_tff_model_delta_client_work(
      self, optimizer, weighting
  ):
    model_fn = _make_model_fn()
    ours = client_work.build_wsm_client_work(
        model_fn,
        optimizer,
        num_classes=NUM_CLASSES,
        client_weighting=weighting,
        proximal_strength=0.1,
    )
    theirs = tff.learning.templates.build_model_delta_client_work(
        model_fn, optimizer, weighting
    )
    for name in ('initialize', 'next', 'get_hparams', 'set_hparams'):
      tff.test.assert_types_identical(
          getattr(ours, name).type_signature,
          getattr(theirs, name).type_signature,
      )

  @pytest.mark.parametrize(
      'kwargs,error,message',
      [
          (
              dict(num_classes=0),
              ValueError,
              r'`num_classes` must be an integer >= 1, got 0\.',
          ),
          (
              dict(num_classes=NUM_CLASSES, proximal_strength=-0.1),
              ValueError,
              r'`proximal_strength` must be a number >= 0, got -0\.1\.',
          ),
          (
              dict(num_classes=NUM_CLASSES, client_weighting='num_examples'),
              TypeError,
              r'`client_weighting` must be a tff\.learning\.ClientWeighting, '
              r"got 'num_examples'",
          ),
          (
              dict(num_classes=NUM_CLASSES, label_key='label'),
              KeyError,
              r"no label key 'label'; keys: \['x', 'y'\]",
          ),
      ],
      ids=['num_classes', 'proximal_strength', 'client_weighting', 'label_key'],
  )
  def test_invalid_arguments_raise(self, kwargs, error, message):
    with pytest.raises(error, match=message):
      client_work.build_wsm_client_work(
          _make_model_fn(), tff.learning.optimizers.build_sgdm(0.1), **kwargs
      )


class TestBuildWsmClientWorkExecution:
  """Updates, weights and metrics vs numpy."""

  @pytest.mark.parametrize('label_shape', ['flat', 'column'])
  @pytest.mark.parametrize('batch_size', [3, 2])  # Partial last batch of 1.
  def test_update_matches_numpy_wsm_sgd(self, batch_size, label_shape):
    # Two clients with different proportions, each with a zero-proportion class.
    clients = [
        (_features(7, 0), SKEWED_LABELS),
        (_features(5, 1), OTHER_LABELS),
    ]
    process = _build(_make_model_fn(label_shape))
    output = _run(
        process, [_dataset(x, y, batch_size, label_shape) for x, y in clients]
    )
    for result, (x, y) in zip(output.result, clients):
      _assert_update_close(
          result.update, _np_client_update(x, y, batch_size, loss='wsm')
      )

  def test_update_of_zero_proportion_class_bias_is_zero(self):
    # No example of class 3 and beta_3 = 0: p_beta_3 = 0 and onehot_3 = 0, so
    # column 3 never moves.
    process = _build()
    output = _run(process, [_dataset(_features(7, 0), SKEWED_LABELS, 3)])
    np.testing.assert_array_equal(output.result[0].update[0][:, 3], 0.0)
    np.testing.assert_array_equal(output.result[0].update[1][3], 0.0)

  @pytest.mark.parametrize(
      'weighting,expected', [(NUM_EXAMPLES, 7.0), (UNIFORM, 1.0)]
  )
  def test_client_weight(self, weighting, expected):
    process = _build(client_weighting=weighting)
    output = _run(process, [_dataset(_features(7, 0), SKEWED_LABELS, 3)])
    assert output.result[0].update_weight == pytest.approx(expected)

  @pytest.mark.parametrize('mu', [0.5, 2.0])
  def test_proximal_update_matches_numpy(self, mu):
    x = _features(7, 0)
    process = _build(proximal_strength=mu)
    output = _run(process, [_dataset(x, SKEWED_LABELS, 2)])
    _assert_update_close(
        output.result[0].update,
        _np_client_update(x, SKEWED_LABELS, 2, loss='wsm', mu=mu),
    )

  @pytest.mark.parametrize('batch_size', [3, 8])
  def test_equal_proportions_give_plain_cross_entropy_update(self, batch_size):
    # beta_j = 1/C for all j: p_beta = softmax(z), the plain CE gradient.
    x = _features(len(BALANCED_LABELS), 2)
    process = _build()
    output = _run(process, [_dataset(x, BALANCED_LABELS, batch_size)])
    _assert_update_close(
        output.result[0].update,
        _np_client_update(x, BALANCED_LABELS, batch_size, loss='plain'),
    )

  def test_learning_rate_comes_from_the_state(self):
    x = _features(7, 0)
    process = _build()
    output = _run(process, [_dataset(x, SKEWED_LABELS, 3)], learning_rate=0.05)
    _assert_update_close(
        output.result[0].update,
        _np_client_update(x, SKEWED_LABELS, 3, loss='wsm', learning_rate=0.05),
    )

  def test_reported_loss_is_plain_cross_entropy(self):
    # The model's loss metric: example-weighted mean of each batch's plain CE,
    # evaluated at the weights before that batch's step (WSM training path).
    x, labels, batch_size = _features(7, 0), SKEWED_LABELS, 3
    beta = _np_class_proportions(labels)
    kernel, bias = KERNEL0.astype(np.float64), BIAS0.astype(np.float64)
    loss_sum = 0.0
    for start in range(0, len(labels), batch_size):
      xb = x[start : start + batch_size].astype(np.float64)
      yb = labels[start : start + batch_size]
      z = xb @ kernel + bias
      loss_sum += -np.log(_np_softmax(z)[np.arange(len(yb)), yb]).sum()
      g = _np_reweighted_softmax(z, beta) - np.eye(NUM_CLASSES)[yb]
      kernel -= LEARNING_RATE * xb.T @ g / len(xb)
      bias -= LEARNING_RATE * g.sum(axis=0) / len(xb)
    process = _build()
    output = _run(process, [_dataset(x, labels, batch_size)])
    train = output.measurements['train']
    assert train['loss'] == pytest.approx(loss_sum / len(labels), abs=1e-5)
    assert train['num_examples'] == len(labels)

  @pytest.mark.parametrize('weighting', [NUM_EXAMPLES, UNIFORM])
  def test_empty_dataset_gives_zero_update_and_zero_weight(self, weighting):
    process = _build(client_weighting=weighting)
    full = _dataset(_features(7, 0), SKEWED_LABELS, 3)
    output = _run(process, [full.take(0), full])
    empty = output.result[0]
    assert empty.update_weight == 0.0
    np.testing.assert_array_equal(empty.update[0], np.zeros_like(KERNEL0))
    np.testing.assert_array_equal(empty.update[1], np.zeros_like(BIAS0))

  def test_scheduled_client_work_sets_the_learning_rate(self):
    # build_scheduled_client_work (fed_win) sets hparams['learning_rate'] = 0.05
    # for round 1.
    x = _features(7, 0)
    process = scheduled_client_work.build_scheduled_client_work(
        _build(), lambda round_num: tf.constant(0.05)
    )
    output = process.next(
        process.initialize(),
        [_initial_weights()],
        [_dataset(x, SKEWED_LABELS, 3)],
    )
    _assert_update_close(
        output.result[0].update,
        _np_client_update(x, SKEWED_LABELS, 3, loss='wsm', learning_rate=0.05),
    )

  @pytest.mark.parametrize('bad_label', [-1, NUM_CLASSES])
  def test_out_of_range_label_raises_the_wsm_error(self, bad_label):
    labels = SKEWED_LABELS.copy()
    labels[4] = bad_label
    process = _build()
    # The worker reports the failed TF assertion (a gRPC error in the remote
    # execution context), with the WSM message.
    with pytest.raises(
        Exception,
        match=f'WSM labels are out of range.*num_classes = ' f'{NUM_CLASSES}',
    ):
      _run(process, [_dataset(_features(7, 0), labels, 3)])
