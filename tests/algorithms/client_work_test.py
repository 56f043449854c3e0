"""Tests for tff_fedwin.algorithms.client_work.build_client_work.

The references are independent of the code under test: TFF's own
`build_model_delta_client_work` (same arithmetic for `'ce'`) and float64
numpy SGD on a linear softmax classifier z = x @ W + b, whose batch-mean
cross-entropy gradient is dL/dW = x^T (softmax(z) - Y) / b,
dL/db = sum_rows(softmax(z) - Y) / b (Y one-hot); FedProx adds mu (w - w0).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import client_work

NUM_CLASSES = 3
INPUT_DIM = 2
KERNEL0 = np.array([[0.2, -0.1, 0.3], [-0.3, 0.25, 0.1]], np.float32)
BIAS0 = np.array([0.1, -0.2, 0.05], np.float32)
NUM_EXAMPLES = tff.learning.ClientWeighting.NUM_EXAMPLES
UNIFORM = tff.learning.ClientWeighting.UNIFORM
LOOPS = client_loop.LOOP_FORMS
OPTIMIZERS = {
    'sgd': lambda: tff.learning.optimizers.build_sgdm(0.3),
    'sgdm': lambda: tff.learning.optimizers.build_sgdm(0.3, momentum=0.9),
    'adam': lambda: tff.learning.optimizers.build_adam(0.05),
}


def _with_both_weightings(first, second):
  """(a, b, weighting) for every pair of `first` x `second`, the weighting
  alternating so that each a and each b meets both weightings: every pair of
  the three factors, in half the cases of their product."""
  return [
      (a, b, (NUM_EXAMPLES, UNIFORM)[(i + j) % 2])
      for i, a in enumerate(first)
      for j, b in enumerate(second)
  ]


def _model_fn():
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.Dense(
              NUM_CLASSES,
              input_shape=(INPUT_DIM,),
              kernel_initializer=tf.keras.initializers.Constant(KERNEL0),
              bias_initializer=tf.keras.initializers.Constant(BIAS0),
          ),
      ]
  )
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
          y=tf.TensorSpec([None], tf.int32),
      ),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )


def _client_data(seed, num_examples=7):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, INPUT_DIM)).astype(np.float32)
  y = rng.integers(0, NUM_CLASSES, size=num_examples).astype(np.int32)
  return x, y


def _dataset(x, y, batch_size=3):
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)
  ).batch(batch_size)


def _weights(kernel=KERNEL0):
  return tff.learning.models.ModelWeights(
      trainable=[kernel, BIAS0], non_trainable=[]
  )


def _run(process, datasets, weights=None):
  return process.next(
      process.initialize(), [weights or _weights()] * len(datasets), datasets
  )


def _np_update(x, y, *, batch_size=3, learning_rate=0.3, mu=0.0):
  kernel0, bias0 = KERNEL0.astype(np.float64), BIAS0.astype(np.float64)
  kernel, bias = kernel0.copy(), bias0.copy()
  for start in range(0, len(y), batch_size):
    xb = x[start : start + batch_size].astype(np.float64)
    z = xb @ kernel + bias
    p = np.exp(z - z.max(axis=1, keepdims=True))
    g = (
        p / p.sum(axis=1, keepdims=True)
        - np.eye(NUM_CLASSES)[y[start : start + batch_size]]
    )
    grad_kernel = xb.T @ g / len(xb) + mu * (kernel - kernel0)
    grad_bias = g.sum(axis=0) / len(xb) + mu * (bias - bias0)
    kernel, bias = (
        kernel - learning_rate * grad_kernel,
        bias - learning_rate * grad_bias,
    )
  return kernel0 - kernel, bias0 - bias


def _assert_outputs_close(ours, theirs, atol=1e-6):
  for a, b in zip(ours.result, theirs.result):
    np.testing.assert_allclose(a.update[0], b.update[0], atol=atol)
    np.testing.assert_allclose(a.update[1], b.update[1], atol=atol)
    assert a.update_weight == b.update_weight
  for name, value in theirs.measurements['train'].items():
    np.testing.assert_allclose(
        ours.measurements['train'][name], value, atol=atol, err_msg=name
    )


class TestBuildClientWorkComputation:

  @pytest.mark.parametrize(
      'client_loss, mu, optimizer, weighting',
      [
          (loss, mu, optimizer, weighting)
          for (loss, mu), optimizer, weighting in _with_both_weightings(
              [('ce', 0.0), ('ce', 0.1), ('wsm', 0.1)], sorted(OPTIMIZERS)
          )
      ],
  )
  def test_type_signatures_equal_tff_model_delta_client_work(
      self, client_loss, mu, optimizer, weighting
  ):
    ours = client_work.build_client_work(
        _model_fn,
        OPTIMIZERS[optimizer](),
        client_loss=client_loss,
        num_classes=NUM_CLASSES,
        proximal_strength=mu,
        client_weighting=weighting,
    )
    theirs = tff.learning.templates.build_model_delta_client_work(
        _model_fn, OPTIMIZERS[optimizer](), weighting
    )
    for name in ('initialize', 'next', 'get_hparams', 'set_hparams'):
      tff.test.assert_types_identical(
          getattr(ours, name).type_signature,
          getattr(theirs, name).type_signature,
      )

  def test_aggregates_metrics_only_with_plain_sums(self):
    process = client_work.build_client_work(_model_fn, OPTIMIZERS['sgd']())
    tff.test.assert_not_contains_unsecure_aggregation(process.initialize)
    tff.test.assert_not_contains_secure_aggregation(process.next)
    tff.test.assert_contains_unsecure_aggregation(process.next)

  @pytest.mark.parametrize(
      'kwargs, error, argument',
      [
          (dict(client_loss='mse'), ValueError, 'client_loss'),
          (dict(client_loss='wsm'), ValueError, 'num_classes'),
          (dict(proximal_strength=-1.0), ValueError, 'proximal_strength'),
          (dict(client_weighting='uniform'), TypeError, 'client_weighting'),
      ],
  )
  def test_rejects_bad_arguments(self, kwargs, error, argument):
    with pytest.raises(error, match=argument):
      client_work.build_client_work(_model_fn, OPTIMIZERS['sgd'](), **kwargs)


class TestBuildClientWorkExecution:

  @pytest.mark.parametrize(
      'loop, optimizer, weighting',
      _with_both_weightings(LOOPS, sorted(OPTIMIZERS)),
  )
  def test_ce_equals_tff_model_delta_client_work(
      self, loop, optimizer, weighting
  ):
    datasets = [_dataset(*_client_data(0)), _dataset(*_client_data(1, 4), 2)]
    ours = client_work.build_client_work(
        _model_fn,
        OPTIMIZERS[optimizer](),
        client_weighting=weighting,
        loop_implementation=loop,
    )
    # TFF has no held loop: ours held against TFF's default reduce.
    their_loop = (
        tff.learning.LoopImplementation.DATASET_REDUCE
        if loop == client_loop.HELD_BATCHES
        else loop
    )
    theirs = tff.learning.templates.build_model_delta_client_work(
        _model_fn,
        OPTIMIZERS[optimizer](),
        weighting,
        loop_implementation=their_loop,
    )
    _assert_outputs_close(_run(ours, datasets), _run(theirs, datasets))

  @pytest.mark.parametrize('mu', [0.5, 2.0])
  def test_tff_fedprox_client_work_has_the_opposite_proximal_sign(self, mu):
    # TFF 0.87's proximal client work adds mu (w_global - w) to the gradient,
    # the gradient of -(mu/2)||w - w_global||^2; ours adds mu (w - w_global)
    # (FedProx Eq. 2). Both are checked against numpy.
    x, y = _client_data(2)
    ours = client_work.build_client_work(
        _model_fn, OPTIMIZERS['sgd'](), proximal_strength=mu
    )
    fedprox_work = tff.learning.templates.proximal_client_work
    theirs = fedprox_work.build_model_delta_client_work(
        _model_fn,
        OPTIMIZERS['sgd'](),
        NUM_EXAMPLES,
        mu,
        loop_implementation=tff.learning.LoopImplementation.DATASET_REDUCE,
    )
    for process, sign in ((ours, 1.0), (theirs, -1.0)):
      update = _run(process, [_dataset(x, y)]).result[0].update
      expected = _np_update(x, y, mu=sign * mu)
      np.testing.assert_allclose(update[0], expected[0], atol=1e-5)
      np.testing.assert_allclose(update[1], expected[1], atol=1e-5)

  @pytest.mark.parametrize('mu', [0.0, 0.5])
  def test_ce_update_matches_numpy_sgd(self, mu):
    x, y = _client_data(4)
    process = client_work.build_client_work(
        _model_fn, OPTIMIZERS['sgd'](), proximal_strength=mu
    )
    output = _run(process, [_dataset(x, y)])
    expected = _np_update(x, y, mu=mu)
    np.testing.assert_allclose(
        output.result[0].update[0], expected[0], atol=1e-5
    )
    np.testing.assert_allclose(
        output.result[0].update[1], expected[1], atol=1e-5
    )
    assert output.result[0].update_weight == 7.0

  @pytest.mark.parametrize('weighting', [NUM_EXAMPLES, UNIFORM])
  def test_empty_client_has_zero_update_and_weight(self, weighting):
    # Unlike TFF, which keeps weight 1 for an empty client under UNIFORM.
    full = _dataset(*_client_data(5))
    process = client_work.build_client_work(
        _model_fn, OPTIMIZERS['sgd'](), client_weighting=weighting
    )
    empty = _run(process, [full.take(0), full]).result[0]
    assert empty.update_weight == 0.0
    np.testing.assert_array_equal(empty.update[0], np.zeros_like(KERNEL0))
    np.testing.assert_array_equal(empty.update[1], np.zeros_like(BIAS0))

  def test_non_finite_update_is_zeroed_with_weight_zero(self):
    kernel = KERNEL0.copy()
    kernel[0, 0] = np.nan
    process = client_work.build_client_work(_model_fn, OPTIMIZERS['sgd']())
    output = _run(process, [_dataset(*_client_data(6))], _weights(kernel))
    result = output.result[0]
    assert result.update_weight == 0.0
    np.testing.assert_array_equal(result.update[0], np.zeros_like(KERNEL0))
    np.testing.assert_array_equal(result.update[1], np.zeros_like(BIAS0))
    # As TFF: the non-finite client's metrics are reset before aggregation.
    assert output.measurements['train']['num_examples'] == 0
