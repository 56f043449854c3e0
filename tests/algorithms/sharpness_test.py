"""Tests for tff_fedwin.algorithms.sharpness: SAM and ASAM client steps.

Against numpy written from the papers' steps (SAM: e = rho g / ||g||; ASAM:
e = rho T^2 g / ||T g||, T = |w| + eta on weights, 1 on biases, as the FedSAM
authors' minimizers.py), on hand-sized arrays and on one client step of the
linear softmax model of client_training_test (its numpy gradients). Whole
runs against numpy: tests/experiments/wiring_test.py (`fedsam`,
`fedprox_wsm_asam_ima`, `scaffold_wsm_asam_window`).
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.algorithms import client_training_test as ct
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import sharpness
from tff_fedwin.algorithms import step_hooks

KERNEL = np.array([[0.5, -2.0], [1.0, 0.0]], np.float32)
BIAS = np.array([0.3, -0.4], np.float32)
G_KERNEL = np.array([[1.0, 2.0], [-2.0, 0.5]], np.float32)
G_BIAS = np.array([0.5, -1.0], np.float32)


def _np_step(kind, rho, eta, weights, grads, scaled):
  """e per array, float64, from the papers' formulas."""
  t = [
      np.abs(w.astype(np.float64)) + eta if (kind == 'asam' and s) else 1.0
      for w, s in zip(weights, scaled)
  ]
  norm = np.sqrt(sum(np.sum((ti * g) ** 2) for ti, g in zip(t, grads)))
  return [rho * ti * ti * g / (norm + 1e-16) for ti, g in zip(t, grads)]


@pytest.mark.parametrize(
    'kind, eta', [('sam', 0.0), ('asam', 0.0), ('asam', 0.2)]
)
def test_perturbation_is_the_papers_step(kind, eta):
  rho = 0.3
  got = sharpness.perturbation(
      sharpness.build_sharpness(kind, rho, eta),
      [tf.constant(G_KERNEL), tf.constant(G_BIAS)],
      [tf.constant(KERNEL), tf.constant(BIAS)],
      [True, False],
  )
  want = _np_step(kind, rho, eta, [KERNEL, BIAS], [G_KERNEL, G_BIAS], [1, 0])
  for g, w in zip(got, want):
    np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)


def test_sam_step_by_hand():
  # g = (3, 4): ||g|| = 5, so e = rho (3, 4) / 5 = (0.06, 0.08) for rho 0.1.
  (e,) = sharpness.perturbation(
      sharpness.build_sharpness('sam', 0.1),
      [tf.constant([3.0, 4.0])],
      [tf.constant([7.0, -7.0])],
      [True],
  )
  np.testing.assert_allclose(e.numpy(), [0.06, 0.08], rtol=1e-6)


def test_asam_step_by_hand():
  # w = (1, -3), eta = 0: T = (1, 3); g = (4, 1): T g = (4, 3), ||T g|| = 5;
  # e = rho T^2 g / 5 = 0.5 (4, 9) / 5 = (0.4, 0.9) for rho 0.5.
  (e,) = sharpness.perturbation(
      sharpness.build_sharpness('asam', 0.5, 0.0),
      [tf.constant([4.0, 1.0])],
      [tf.constant([1.0, -3.0])],
      [True],
  )
  np.testing.assert_allclose(e.numpy(), [0.4, 0.9], rtol=1e-6)


@pytest.mark.parametrize(
    'name, scaled',
    [
        ('dense/kernel:0', True),
        ('dense/bias:0', False),
        ('batch_normalization/gamma:0', True),
        ('batch_normalization/beta:0', False),
        ('lstm/lstm_cell/recurrent_kernel:0', True),
        ('lstm/lstm_cell/bias:0', False),
        ('embedding/embeddings:0', True),
    ],
)
def test_asam_scales_weights_not_biases(name, scaled):
  assert sharpness.is_scaled(name) is scaled


@pytest.mark.parametrize(
    'args, match',
    [
        (('adam', 0.1), '`kind` must be one of sam, asam'),
        (('sam', 0.0), 'rho'),
        (('asam', 0.1, -0.5), 'eta'),
    ],
)
def test_bad_arguments_are_refused(args, match):
  with pytest.raises(ValueError, match=match):
    sharpness.build_sharpness(*args)


def test_a_client_training_refuses_what_is_not_a_sharpness():
  with pytest.raises(TypeError, match='`sharpness` must be a'):
    client_training.build_client_training(
        ct._model(),
        optimizer_step=step_hooks.sgd_step(ct.LEARNING_RATE),
        sharpness=('sam', 0.1, 0.0),
    )


@pytest.mark.parametrize('kind, eta', [('sam', 0.0), ('asam', 0.2)])
def test_client_step_descends_the_gradient_at_the_perturbed_weights(kind, eta):
  rho = 0.5
  training = client_training.build_client_training(
      ct._model(),
      optimizer_step=step_hooks.sgd_step(ct.LEARNING_RATE),
      sharpness=sharpness.build_sharpness(kind, rho, eta),
  )
  state = training.client_init(
      ct._weights(ct.KERNEL0, ct.BIAS0), ct._dataset(3), ()
  )
  state = training.client_step(state, ct._batch(0, 3))

  kernel0, bias0 = ct.KERNEL0.astype(np.float64), ct.BIAS0.astype(np.float64)
  gw, gb, loss = ct._np_gradients(kernel0, bias0, ct.X[:3], ct.Y[:3])
  ew, eb = _np_step(kind, rho, eta, [kernel0, bias0], [gw, gb], [1, 0])
  gw2, gb2, _ = ct._np_gradients(kernel0 + ew, bias0 + eb, ct.X[:3], ct.Y[:3])
  kernel, bias = ct._trainable(training)
  np.testing.assert_allclose(
      kernel, kernel0 - ct.LEARNING_RATE * gw2, atol=1e-6
  )
  np.testing.assert_allclose(bias, bias0 - ct.LEARNING_RATE * gb2, atol=1e-6)
  # The step moved by the perturbed gradient, not the plain one.
  assert np.abs(gw2 - gw).max() > 1e-2
  # The batch counts once in the loss and the model's metrics, at w.
  np.testing.assert_allclose(state.loss_sum, 3 * loss, rtol=1e-6)
  metrics = training.model.report_local_unfinalized_metrics()
  assert metrics['num_examples'][0].numpy() == 3
  np.testing.assert_allclose(
      metrics['loss'][0] / metrics['loss'][1], loss, rtol=1e-6
  )
