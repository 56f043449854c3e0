"""Tests for tff_fedwin.algorithms.client_training, part by part, vs numpy.

The model is a linear softmax classifier z = x @ W + b (Keras Dense(C) on
logits, run eagerly). For the batch mean of the softmax cross-entropy the
gradient is dL/dW = x^T (P - Y) / b, dL/db = sum_rows(P - Y) / b, with P =
softmax(z) and Y the one-hot labels; for WSM P holds p_beta_j = beta_j e^{z_j}
/ sum_k beta_k e^{z_k} (WSM Eq. 4). Expected values are written from these
formulas in float64 numpy, never from the code under test.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import step_hooks

NUM_CLASSES = 3
INPUT_DIM = 2
LEARNING_RATE = 0.3
KERNEL0 = np.array([[0.2, -0.1, 0.3], [-0.3, 0.25, 0.1]], np.float32)
BIAS0 = np.array([0.1, -0.2, 0.05], np.float32)
KERNEL1 = np.array([[0.5, 0.0, -0.2], [0.1, 0.2, -0.3]], np.float32)
BIAS1 = np.array([-0.1, 0.3, 0.2], np.float32)
X = np.array(
    [[1.0, -0.5], [0.3, 0.8], [-1.2, 0.4], [0.6, 0.6], [0.0, -1.0]], np.float32
)
Y = np.array([0, 1, 1, 0, 1], np.int32)  # Class 2 absent: beta_2 = 0.


class _Unused(tf.keras.layers.Layer):
  """Identity with a trainable weight that never reaches the loss."""

  def build(self, input_shape):
    self.unused = self.add_weight(name='unused', shape=(2,), initializer='ones')

  def call(self, inputs):
    return inputs


def _model(with_unused=False):
  layers = [tf.keras.layers.InputLayer(input_shape=(INPUT_DIM,))]
  if with_unused:
    layers.append(_Unused())
  layers.append(tf.keras.layers.Dense(NUM_CLASSES))
  return tff.learning.models.from_keras_model(
      tf.keras.Sequential(layers),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
          y=tf.TensorSpec([None], tf.int32),
      ),
  )


def _weights(kernel, bias, extra=()):
  return tff.learning.models.ModelWeights(
      trainable=list(extra) + [tf.constant(kernel), tf.constant(bias)],
      non_trainable=[],
  )


def _dataset(batch_size):
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=X, y=Y)
  ).batch(batch_size)


def _batch(start, stop):
  return collections.OrderedDict(
      x=tf.constant(X[start:stop]), y=tf.constant(Y[start:stop])
  )


def _build(
    client_loss='ce',
    gradient_transform=None,
    optimizer_step=None,
    with_unused=False,
    weight_decay=0.0,
):
  return client_training.build_client_training(
      _model(with_unused),
      optimizer_step=optimizer_step or step_hooks.sgd_step(LEARNING_RATE),
      client_loss=client_loss,
      num_classes=NUM_CLASSES if client_loss == 'wsm' else None,
      gradient_transform=gradient_transform,
      weight_decay=weight_decay,
  )


# Numpy side (float64).


def _np_probabilities(z, beta=None):
  beta = np.ones(z.shape[1]) if beta is None else beta
  a = beta[None, :] * np.exp(z - z.max(axis=1, keepdims=True))
  return a / a.sum(axis=1, keepdims=True)


def _np_gradients(kernel, bias, x, y, beta=None):
  """(dL/dW, dL/db, plain CE loss) of the batch mean at (W, b)."""
  x = x.astype(np.float64)
  z = x @ kernel + bias
  g = _np_probabilities(z, beta) - np.eye(NUM_CLASSES)[y]
  loss = -np.mean(np.log(_np_probabilities(z)[np.arange(len(y)), y]))
  return x.T @ g / len(y), g.sum(axis=0) / len(y), loss


def _np_beta(y):
  return np.bincount(y, minlength=NUM_CLASSES) / len(y)


def _np_sgd(batch_size, beta=None, learning_rate=LEARNING_RATE):
  kernel, bias = KERNEL0.astype(np.float64), BIAS0.astype(np.float64)
  for start in range(0, len(Y), batch_size):
    gw, gb, _ = _np_gradients(
        kernel,
        bias,
        X[start : start + batch_size],
        Y[start : start + batch_size],
        beta,
    )
    kernel, bias = kernel - learning_rate * gw, bias - learning_rate * gb
  return kernel, bias


def _trainable(training):
  return [v.numpy() for v in training.model_weights.trainable]


class TestClientInit:

  def test_assigns_weights_and_zeroes_counters(self):
    training = _build()
    state = training.client_init(_weights(KERNEL1, BIAS1), _dataset(2))

    np.testing.assert_array_equal(_trainable(training)[0], KERNEL1)
    np.testing.assert_array_equal(_trainable(training)[1], BIAS1)
    assert state.num_examples.numpy() == 0
    assert state.num_steps.numpy() == 0
    assert state.loss_sum.numpy() == 0.0
    assert state.optimizer_state == ()
    assert state.step_input == ()
    assert state.class_proportions == ()

  def test_wsm_counts_class_proportions(self):
    training = _build('wsm')
    state = training.client_init(_weights(KERNEL0, BIAS0), _dataset(2))

    np.testing.assert_allclose(state.class_proportions, [0.4, 0.6, 0.0])

  def test_keeps_step_input_flat(self):
    training = _build()
    state = training.client_init(
        _weights(KERNEL0, BIAS0),
        _dataset(2),
        [tf.constant(KERNEL1), tf.constant(BIAS1)],
    )

    assert isinstance(state.step_input, tuple)
    np.testing.assert_array_equal(state.step_input[0], KERNEL1)
    np.testing.assert_array_equal(state.step_input[1], BIAS1)

  def test_tff_optimizer_state_takes_the_hparams(self):
    training = _build(
        optimizer_step=step_hooks.tff_optimizer_step(
            tff.learning.optimizers.build_sgdm(0.9)
        )
    )
    state = training.client_init(
        _weights(KERNEL0, BIAS0),
        _dataset(2),
        (),
        collections.OrderedDict(learning_rate=tf.constant(0.05)),
    )

    assert state.optimizer_state['learning_rate'].numpy() == pytest.approx(0.05)


class TestClientStep:

  def _step(
      self, training, start=0, stop=3, weights=(KERNEL0, BIAS0), step_input=()
  ):
    state = training.client_init(_weights(*weights), _dataset(3), step_input)
    return training.client_step(state, _batch(start, stop))

  @pytest.mark.parametrize('client_loss', ['ce', 'wsm'])
  def test_takes_one_sgd_step(self, client_loss):
    training = _build(client_loss)
    state = self._step(training)

    beta = _np_beta(Y) if client_loss == 'wsm' else None
    gw, gb, loss = _np_gradients(
        KERNEL0.astype(np.float64), BIAS0, X[:3], Y[:3], beta
    )
    kernel, bias = _trainable(training)
    np.testing.assert_allclose(kernel, KERNEL0 - LEARNING_RATE * gw, atol=1e-6)
    np.testing.assert_allclose(bias, BIAS0 - LEARNING_RATE * gb, atol=1e-6)
    assert state.num_examples.numpy() == 3
    assert state.num_steps.numpy() == 1
    # The reported loss is the model's plain CE, also when training on WSM.
    np.testing.assert_allclose(state.loss_sum, 3 * loss, rtol=1e-6)

  def test_proximal_gradient_adds_mu_times_distance(self):
    mu = 0.5
    training = _build(gradient_transform=step_hooks.proximal_gradient(mu))
    # Start at w = (KERNEL1, BIAS1) with w_global = (KERNEL0, BIAS0).
    self._step(
        training,
        weights=(KERNEL1, BIAS1),
        step_input=[tf.constant(KERNEL0), tf.constant(BIAS0)],
    )

    gw, gb, _ = _np_gradients(KERNEL1.astype(np.float64), BIAS1, X[:3], Y[:3])
    kernel, bias = _trainable(training)
    np.testing.assert_allclose(
        kernel,
        KERNEL1 - LEARNING_RATE * (gw + mu * (KERNEL1 - KERNEL0)),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        bias, BIAS1 - LEARNING_RATE * (gb + mu * (BIAS1 - BIAS0)), atol=1e-6
    )

  def test_control_variate_correction_adds_the_correction(self):
    correction = [
        np.full(KERNEL0.shape, 0.2, np.float32),
        np.array([0.1, -0.3, 0.0], np.float32),
    ]
    training = _build(gradient_transform=step_hooks.control_variate_correction)
    self._step(training, step_input=[tf.constant(c) for c in correction])

    gw, gb, _ = _np_gradients(KERNEL0.astype(np.float64), BIAS0, X[:3], Y[:3])
    kernel, bias = _trainable(training)
    np.testing.assert_allclose(
        kernel, KERNEL0 - LEARNING_RATE * (gw + correction[0]), atol=1e-6
    )
    np.testing.assert_allclose(
        bias, BIAS0 - LEARNING_RATE * (gb + correction[1]), atol=1e-6
    )

  def test_tff_optimizer_step_with_momentum(self):
    training = _build(
        optimizer_step=step_hooks.tff_optimizer_step(
            tff.learning.optimizers.build_sgdm(LEARNING_RATE, momentum=0.5)
        )
    )
    state = training.client_init(_weights(KERNEL0, BIAS0), _dataset(3))
    state = training.client_step(state, _batch(0, 3))
    state = training.client_step(state, _batch(3, 5))

    # TFF SGDM: a = 0.5 a + g; w -= lr a.
    kernel, bias = KERNEL0.astype(np.float64), BIAS0.astype(np.float64)
    acc_w, acc_b = np.zeros_like(kernel), np.zeros_like(bias)
    for start, stop in ((0, 3), (3, 5)):
      gw, gb, _ = _np_gradients(kernel, bias, X[start:stop], Y[start:stop])
      acc_w, acc_b = 0.5 * acc_w + gw, 0.5 * acc_b + gb
      kernel = kernel - LEARNING_RATE * acc_w
      bias = bias - LEARNING_RATE * acc_b
    np.testing.assert_allclose(_trainable(training)[0], kernel, atol=1e-6)
    np.testing.assert_allclose(_trainable(training)[1], bias, atol=1e-6)
    assert state.num_steps.numpy() == 2
    assert state.num_examples.numpy() == 5

  @pytest.mark.parametrize('client_loss', ['ce', 'wsm'])
  def test_weight_decay_before_momentum_as_pytorch_sgd(self, client_loss):
    wd = 0.1
    training = _build(
        client_loss,
        optimizer_step=step_hooks.tff_optimizer_step(
            tff.learning.optimizers.build_sgdm(LEARNING_RATE, momentum=0.9)
        ),
        weight_decay=wd,
    )
    state = training.client_init(_weights(KERNEL0, BIAS0), _dataset(3))
    state = training.client_step(state, _batch(0, 3))
    state = training.client_step(state, _batch(3, 5))

    # torch.optim.SGD(lr, momentum=0.9, weight_decay=wd), dampening 0:
    # d = g + wd * w; buf = 0.9 buf + d (buf = d at the first step, the same
    # as from buf = 0); w -= lr * buf. The bias decays too (PyTorch decays
    # every parameter of the group).
    beta = _np_beta(Y) if client_loss == 'wsm' else None
    kernel, bias = KERNEL0.astype(np.float64), BIAS0.astype(np.float64)
    buf_w, buf_b = np.zeros_like(kernel), np.zeros_like(bias)
    for start, stop in ((0, 3), (3, 5)):
      gw, gb, _ = _np_gradients(
          kernel, bias, X[start:stop], Y[start:stop], beta
      )
      buf_w = 0.9 * buf_w + (gw + wd * kernel)
      buf_b = 0.9 * buf_b + (gb + wd * bias)
      kernel = kernel - LEARNING_RATE * buf_w
      bias = bias - LEARNING_RATE * buf_b
    np.testing.assert_allclose(_trainable(training)[0], kernel, atol=1e-6)
    np.testing.assert_allclose(_trainable(training)[1], bias, atol=1e-6)

  def test_weight_decay_with_the_control_variate_correction(self):
    # SCAFFOLD's step: y <- y - lr (g(y) + wd y + c - c_i).
    wd, correction = 0.2, [
        np.full(KERNEL0.shape, 0.2, np.float32),
        np.array([0.1, -0.3, 0.0], np.float32),
    ]
    training = _build(
        gradient_transform=step_hooks.control_variate_correction,
        weight_decay=wd,
    )
    self._step(training, step_input=[tf.constant(c) for c in correction])

    gw, gb, _ = _np_gradients(KERNEL0.astype(np.float64), BIAS0, X[:3], Y[:3])
    kernel, bias = _trainable(training)
    np.testing.assert_allclose(
        kernel,
        KERNEL0 - LEARNING_RATE * (gw + wd * KERNEL0 + correction[0]),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        bias,
        BIAS0 - LEARNING_RATE * (gb + wd * BIAS0 + correction[1]),
        atol=1e-6,
    )

  def test_missing_gradient_is_zero(self):
    training = _build(with_unused=True)
    state = training.client_init(
        _weights(KERNEL0, BIAS0, extra=[tf.constant([2.0, 3.0])]), _dataset(3)
    )
    training.client_step(state, _batch(0, 3))

    np.testing.assert_array_equal(_trainable(training)[0], [2.0, 3.0])


class TestClientFinal:

  def test_reads_delta_and_counters(self):
    training = _build()
    state = training.client_init(_weights(KERNEL1, BIAS1), _dataset(3))
    state = state._replace(
        num_examples=tf.constant(7, tf.int64),
        num_steps=tf.constant(2, tf.int64),
        loss_sum=tf.constant(1.5),
    )
    output = training.client_final(
        [tf.constant(KERNEL0), tf.constant(BIAS0)], state
    )

    np.testing.assert_allclose(output.model_delta[0], KERNEL0 - KERNEL1)
    np.testing.assert_allclose(output.model_delta[1], BIAS0 - BIAS1)
    assert bool(output.all_finite)
    assert output.num_examples.numpy() == 7
    assert output.num_steps.numpy() == 2
    assert output.loss_sum.numpy() == 1.5

  def test_non_finite_delta_is_flagged_and_zeroed_on_request(self):
    training = _build()
    state = training.client_init(_weights(KERNEL1, BIAS1), _dataset(3))
    bad = BIAS0.copy()
    bad[1] = np.nan
    output = training.client_final(
        [tf.constant(KERNEL0), tf.constant(bad)], state
    )

    assert not bool(output.all_finite)
    zeroed = client_training.zero_all_if_any_non_finite(
        output.model_delta, output.all_finite
    )
    np.testing.assert_array_equal(zeroed[0], np.zeros_like(KERNEL0))
    np.testing.assert_array_equal(zeroed[1], np.zeros_like(BIAS0))


@pytest.mark.parametrize('loop', client_loop.LOOP_FORMS)
@pytest.mark.parametrize('client_loss', ['ce', 'wsm'])
def test_train_client_matches_numpy_sgd(loop, client_loss):
  training = _build(client_loss)

  @tf.function
  def run(dataset):
    return client_loop.train_client(
        training,
        _weights(KERNEL0, BIAS0),
        dataset,
        loop_implementation=loop,
    )

  output = run(_dataset(2))  # Batches of 2, 2, 1.

  kernel, bias = _np_sgd(2, _np_beta(Y) if client_loss == 'wsm' else None)
  np.testing.assert_allclose(output.model_delta[0], KERNEL0 - kernel, atol=1e-6)
  np.testing.assert_allclose(output.model_delta[1], BIAS0 - bias, atol=1e-6)
  assert output.num_steps.numpy() == 3
  assert output.num_examples.numpy() == 5


@pytest.mark.parametrize(
    'kwargs, argument',
    [
        (dict(client_loss='mse'), 'client_loss'),
        (dict(client_loss='wsm'), 'num_classes'),
        (dict(client_loss='wsm', num_classes=0), 'num_classes'),
        (dict(weight_decay=-0.1), 'weight_decay'),
    ],
)
def test_build_rejects_bad_loss_arguments(kwargs, argument):
  with pytest.raises(ValueError, match=argument):
    client_training.build_client_training(
        _model(), optimizer_step=step_hooks.sgd_step(0.1), **kwargs
    )


def test_batch_size_falls_back_to_the_predictions():
  output = tff.learning.models.BatchOutput(
      loss=tf.constant(0.0),
      predictions=tf.zeros([4, 3]),
      num_examples=None,
  )
  assert client_training.batch_size(output).numpy() == 4


def test_batch_size_is_the_models_count_when_it_reports_one():
  # The model's count wins over the predictions' 4 rows (an int32 5 -> int64).
  output = tff.learning.models.BatchOutput(
      loss=tf.constant(0.0),
      predictions=tf.zeros([4, 3]),
      num_examples=tf.constant(5, tf.int32),
  )
  size = client_training.batch_size(output)
  assert size.dtype == tf.int64 and size.numpy() == 5
