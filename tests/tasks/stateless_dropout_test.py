"""Tests for tff_fedwin.tasks.stateless_dropout: masks without state.

What a dropout layer must do is known without the code under test: in
training every value is 0 or x / (1 - rate) (inverted dropout), the dropped
fraction is `rate` up to the binomial spread, and outside training nothing
changes. What this layer adds is checked by its consequences: the same input
gives the same output in any fresh graph, layers of other streams or another
run seed drop other values, and a TFF round run twice in one process (where
Keras' stateful `Dropout` goes on drawing) trains on the same masks.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import mime_lite
from tff_fedwin.tasks import emnist
from tff_fedwin.tasks import stateless_dropout

RATE = 0.25
SHAPE = (200, 500)  # 100,000 values.


def _inputs(seed=0):
  # Strictly positive, so a kept value is never 0.
  rng = np.random.default_rng(seed)
  return tf.constant(rng.random(SHAPE, np.float32) + 0.5)


def _apply(x, seed=1, stream=0, rate=RATE, training=True):
  """The layer built in a fresh graph (a new `tf.function`) and applied."""
  layer = stateless_dropout.StatelessDropout(rate, seed, stream=stream)
  return tf.function(lambda t: layer(t, training=training))(x).numpy()


def test_training_output_is_zero_or_inverted_scale():
  x = _inputs()
  y = _apply(x)
  kept = y != 0
  # Kept values are multiplied by the float32 scale 1 / (1 - rate).
  scale = np.float32(1 / (1 - RATE))
  np.testing.assert_array_equal(y[kept], x.numpy()[kept] * scale)
  # 100,000 Bernoulli(0.25) draws: the dropped fraction's standard deviation
  # is sqrt(0.25 * 0.75 / 1e5) = 0.00137; 0.01 is over 7 of them.
  assert abs((~kept).mean() - RATE) < 0.01


@pytest.mark.parametrize('training', [False, None])
def test_outside_training_is_identity(training):
  x = _inputs()
  np.testing.assert_array_equal(_apply(x, training=training), x.numpy())


def test_same_input_same_mask_in_fresh_graphs():
  x = _inputs()
  np.testing.assert_array_equal(_apply(x), _apply(x))
  eager = stateless_dropout.StatelessDropout(RATE, 1)(x, training=True)
  np.testing.assert_array_equal(eager.numpy(), _apply(x))


@pytest.mark.parametrize(
    'other',
    [
        dict(stream=1),  # Another layer of the same model.
        dict(seed=2),  # Another run seed.
        dict(x_seed=1),  # Other activations (model, client or step).
    ],
)
def test_streams_seeds_and_inputs_draw_other_masks(other):
  x = _inputs()
  base = _apply(x) == 0
  x_other = _inputs(other.pop('x_seed', 0))
  mask = _apply(x_other, **other) == 0
  # Independent masks agree on 0.25^2 + 0.75^2 = 62.5% of the values; the
  # same mask on all of them.
  assert 0.6 < (base == mask).mean() < 0.65


def test_one_changed_value_draws_another_mask():
  x = _inputs().numpy()
  changed = x.copy()
  changed[7, 11] = np.nextafter(changed[7, 11], np.float32(2))
  assert (_apply(tf.constant(x)) != 0).mean() != pytest.approx(0)
  assert not np.array_equal(
      _apply(tf.constant(x)) == 0, _apply(tf.constant(changed)) == 0
  )


def test_rate_outside_unit_interval_is_refused():
  with pytest.raises(ValueError, match=r'`rate` must be in \[0, 1\), got 1.0'):
    stateless_dropout.StatelessDropout(1.0)


def test_config_round_trip():
  layer = stateless_dropout.StatelessDropout(0.5, 7, stream=3, name='d')
  again = stateless_dropout.StatelessDropout.from_config(layer.get_config())
  assert (again.rate, again.seed, again.stream, again.name) == (0.5, 7, 3, 'd')


def test_cnn_dropout_masks_are_stateless_layers_with_distinct_streams():
  model = emnist.create_cnn_dropout_model(62, seed=5)
  layers = [l for l in model.layers if 'dropout' in type(l).__name__.lower()]
  assert [(type(l), l.rate, l.seed, l.stream) for l in layers] == [
      (stateless_dropout.StatelessDropout, 0.25, 5, 0),
      (stateless_dropout.StatelessDropout, 0.5, 5, 1),
  ]


# TFF's builders call the model's own forward pass in their client step; a
# client learning rate of 0 keeps the weights, so the round's train loss is
# the loss of the initial model under the round's masks.
IMAGE = (12, 12, 1)
NUM_CLASSES = 4


def _model_fn():
  spec = collections.OrderedDict(
      x=tf.TensorSpec([None, *IMAGE], tf.float32),
      y=tf.TensorSpec([None], tf.int32),
  )
  return tff.learning.models.from_keras_model(
      emnist.create_cnn_dropout_model(NUM_CLASSES, 3, IMAGE),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=spec,
  )


def _client_data():
  rng = np.random.default_rng(4)
  data = []
  for _ in range(2):
    x = rng.random((16, *IMAGE), np.float32)
    y = rng.integers(0, NUM_CLASSES, 16).astype(np.int32)
    data.append(
        tf.data.Dataset.from_tensor_slices(
            collections.OrderedDict(x=x, y=y)
        ).batch(8)
    )
  return data, x, y


BUILDERS = {
    'tff_fed_avg': lambda: tff.learning.algorithms.build_weighted_fed_avg(
        _model_fn, tff.learning.optimizers.build_sgdm(0.0)
    ),
    'mime_lite': lambda: mime_lite.build_mime_lite_with_window(
        _model_fn,
        tff.learning.optimizers.build_sgdm(0.0),
        tff.learning.optimizers.build_sgdm(1.0),
        window_size=2,
    ),
    'fed_win': lambda: fed_win.build_fed_win(
        _model_fn, tff.learning.optimizers.build_sgdm(0.0), window_size=2
    ),
}


@pytest.mark.parametrize('builder', sorted(BUILDERS))
def test_a_round_twice_trains_on_the_same_masks(builder):
  process = BUILDERS[builder]()
  state = process.initialize()
  data, _, _ = _client_data()
  losses = [
      process.next(state, data).metrics['client_work']['train']['loss']
      for _ in range(2)
  ]
  assert losses[0] == losses[1]
  # The same model without dropout (inference mode), over both clients'
  # 32 examples: the masks did change the loss.
  weights = process.get_model_weights(state)
  keras_model = emnist.create_cnn_dropout_model(NUM_CLASSES, 3, IMAGE)
  keras_model.set_weights(weights.trainable)
  xs = np.concatenate([np.stack([b['x'] for b in d.unbatch()]) for d in data])
  ys = np.concatenate([np.stack([b['y'] for b in d.unbatch()]) for d in data])
  logits = keras_model(xs, training=False).numpy().astype(np.float64)
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  plain_loss = -log_softmax[np.arange(len(ys)), ys].mean()
  assert abs(losses[0] - plain_loss) > 1e-4
