"""FedFA (Zhou et al. 2023, as the IMA authors run it) against numpy.

`tests.fedfa_reference` is the method in float64 numpy (anchor loss, SGD,
the classifier's Adam calibration on the anchors, the anchors' momentum and
the server's example-weighted mean; module docstring of
`tff_fedwin.algorithms.fedfa`) on a one-hidden-layer ReLU network over
`tests.scaffold_reference`'s data and sampling. Four rounds cover round 1
(cross-entropy only), round 2 (the anchor loss) and rounds 3-4 (with the
calibration, from round 3).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import fedfa_reference as fref
from tests import scaffold_reference as sref
from tff_fedwin.algorithms import fedfa
from tff_fedwin.tasks import feature_model

ROUNDS = 4
LR = sref.CLIENT_LEARNING_RATE
LAMBDA = 0.5
MOMENTUM = 0.5
# The first round that calibrates (the IMA authors' t - 1 > R / 4 = 1).
CALIBRATION_START = 3


def model_fn():
  """`fref`'s network as a `FeatureModel`: Dense(4, relu), Dense(3)."""
  w1, b1, w2, b2 = (p.astype(np.float32) for p in fref.np_initial_params())
  const = tf.keras.initializers.Constant
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.InputLayer(input_shape=(sref.NUM_FEATURES,)),
          tf.keras.layers.Dense(
              fref.NUM_HIDDEN,
              activation='relu',
              kernel_initializer=const(w1),
              bias_initializer=const(b1),
          ),
          tf.keras.layers.Dense(
              sref.NUM_CLASSES,
              kernel_initializer=const(w2),
              bias_initializer=const(b2),
          ),
      ]
  )
  return feature_model.FeatureModel(
      keras_model,
      input_spec=sref.INPUT_SPEC,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
  )


def np_fedfa(rounds, *, server_lr, window_size=None, mode='evaluate'):
  """[(x sent next, anchors, examples, window model)] after rounds 1..rounds."""
  x, anchors = fref.np_initial_params(), fref.np_initial_anchors()
  aggregated, history = [x], []
  for t in range(1, rounds + 1):
    batches = [
        list(sref.np_batches(sref.CLIENT_DATA[i]))
        for i in sref.sampled_clients(t)
    ]
    w_t, anchors, examples = fref.np_fedfa_round(
        x,
        anchors,
        batches,
        lr=LR,
        server_lr=server_lr,
        lam=LAMBDA,
        momentum=MOMENTUM,
        anchor_loss=t > 1,
        calibrate=t >= CALIBRATION_START,
    )
    aggregated.append(w_t)
    x, window = sref.np_windowed(aggregated, t, window_size, mode)
    history.append((x, anchors, examples, window))
  return history


def _build(**kwargs):
  return fedfa.build_fedfa(
      model_fn,
      anchor_lambda=LAMBDA,
      anchor_momentum=MOMENTUM,
      calibration_start_round=CALIBRATION_START,
      client_learning_rate=LR,
      total_clients=sref.TOTAL_CLIENTS,
      **kwargs,
  )


CASES = {
    'plain': dict(server_learning_rate=0.5),
    'ima': dict(window_size=2, window_mode='broadcast'),
}


@pytest.mark.parametrize('name', list(CASES))
def test_rounds_match_numpy_fedfa(name):
  kwargs = CASES[name]
  process = _build(**kwargs)
  assert isinstance(process, tff.learning.templates.LearningProcess)
  expected = np_fedfa(
      ROUNDS,
      server_lr=kwargs.get('server_learning_rate', 1.0),
      window_size=kwargs.get('window_size'),
      mode=kwargs.get('window_mode', 'evaluate'),
  )
  for t, state in sref.run_learning_rounds(process, ROUNDS):
    x, anchors, examples, window = expected[t - 1]
    sref.assert_close(state.global_model_weights.trainable, x)
    np.testing.assert_allclose(state.control_variate[0], anchors, atol=1e-5)
    assert state.control_variate[1] == examples
    sref.assert_close(process.get_model_weights(state).trainable, window)


def test_anchors_move_and_calibration_changes_the_classifier():
  # The numpy reference itself: the anchors leave the identity rows, and
  # the calibration changes the round's classifier (so the test above sees
  # each part of the method).
  expected = np_fedfa(ROUNDS, server_lr=1.0)
  assert not np.allclose(expected[0][1], fref.np_initial_anchors())
  params, anchors = expected[1][0], expected[1][1]
  batches = [
      list(sref.np_batches(sref.CLIENT_DATA[i]))
      for i in sref.sampled_clients(3)
  ]
  args = dict(lr=LR, server_lr=1.0, lam=LAMBDA, momentum=MOMENTUM)
  with_calibration = fref.np_fedfa_round(
      params, anchors, batches, anchor_loss=True, calibrate=True, **args
  )[0]
  without = fref.np_fedfa_round(
      params, anchors, batches, anchor_loss=True, calibrate=False, **args
  )[0]
  assert np.abs(with_calibration[2] - without[2]).max() > 1e-4


def test_needs_a_model_with_features():
  with pytest.raises(ValueError, match='fedfa needs `model_fn` to build a'):
    fedfa.build_fedfa(
        sref.model_fn,
        anchor_lambda=LAMBDA,
        anchor_momentum=MOMENTUM,
        calibration_start_round=CALIBRATION_START,
        client_learning_rate=LR,
        total_clients=sref.TOTAL_CLIENTS,
    )


@pytest.mark.parametrize(
    'args, flag',
    [
        ((-0.1, 0.5, 1), 'fedfa_lambda'),
        ((0.1, 1.5, 1), 'fedfa_momentum'),
        ((0.1, 0.5, 0), 'fedfa_calibration_start_round'),
    ],
)
def test_hyperparameters_are_checked(args, flag):
  with pytest.raises(ValueError, match=flag):
    fedfa.FedFa(*args)
