"""Tests for tff_fedwin.tasks.image_models and resnet_gn: the `--model` zoo.

Every parameter count is derived here from the layer arithmetic, not read from
the code under test: a k x k convolution from `cin` to `cout` channels holds
`k * k * cin * cout` weights (+ `cout` biases), a dense layer `n_in * n_out +
n_out`, a group normalization of `c` channels `2 * c` (scale and offset);
pooling, dropout, reshapes and option-A shortcuts none. Spatial sizes follow
'valid' (`h - k + 1`), 'same' (`h`) and 2x2 pools (`h // 2`). Reference figures
from the literature are checked where they exist.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from tff_fedwin.tasks import emnist
from tff_fedwin.tasks import image_models
from tff_fedwin.tasks import registry
from tff_fedwin.tasks import resnet_gn


def _conv(k, cin, cout, bias=True):
  return k * k * cin * cout + (cout if bias else 0)


def _dense(n_in, n_out):
  return n_in * n_out + n_out


def _gn(channels):
  return 2 * channels


def _small_cnn(h, c, classes):
  """conv3 16 -> pool -> conv3 32 -> pool -> dense; 'valid' if h >= 10."""
  if h >= 10:
    side = ((h - 2) // 2 - 2) // 2
  else:  # 'same' convolutions keep h; 'same' pools take ceil(h / 2).
    side = math.ceil(math.ceil(h / 2) / 2)
  return _conv(3, c, 16) + _conv(3, 16, 32) + _dense(side * side * 32, classes)


def _cnn_dropout(h, c, classes):
  """conv3 32 -> conv3 64 ('valid') -> pool -> dense 128 -> dense."""
  side = (h - 4) // 2
  return (
      _conv(3, c, 32)
      + _conv(3, 32, 64)
      + _dense(side * side * 64, 128)
      + _dense(128, classes)
  )


def _leaf_cnn(h, c, classes):
  """conv5 32 'same' -> pool -> conv5 64 'same' -> pool -> 2048 -> dense."""
  side = h // 2 // 2
  return (
      _conv(5, c, 32)
      + _conv(5, 32, 64)
      + _dense(side * side * 64, 2048)
      + _dense(2048, classes)
  )


def _ima_cnn(h, c, classes):
  """IMA Table 4: conv5 f -> pool -> conv5 f ('valid') -> pool -> 384, 128."""
  f = 32 if c == 1 else 64
  side = ((h - 4) // 2 - 4) // 2
  return (
      _conv(5, c, f)
      + _conv(5, f, f)
      + _dense(side * side * f, 384)
      + _dense(384, 128)
      + _dense(128, classes)
  )


def _resnet(c, classes, *, stem, stages, blocks, projection):
  """Stem conv3-GN, BasicBlocks of two conv3-GN (+ 1x1 conv-GN), dense."""
  total = _conv(3, c, stem, bias=False) + _gn(stem)
  cin = stem
  for index, cout in enumerate(stages):
    for block in range(blocks):
      total += 2 * _gn(cout)
      total += _conv(3, cin, cout, False) + _conv(3, cout, cout, False)
      changes = cin != cout or (index > 0 and block == 0)
      if changes and projection:
        total += _conv(1, cin, cout, bias=False) + _gn(cout)
      cin = cout
  return total + _dense(stages[-1], classes)


def _resnet18(h, c, classes):
  del h  # Global average pooling: no spatial dependence.
  return _resnet(
      c, classes, stem=64, stages=(64, 128, 256, 512), blocks=2, projection=1
  )


def _resnet20(h, c, classes):
  del h
  return _resnet(
      c, classes, stem=16, stages=(16, 32, 64), blocks=3, projection=0
  )


_EXPECTED = {
    'cnn': _small_cnn,
    'cnn_dropout': _cnn_dropout,
    'leaf_cnn': _leaf_cnn,
    'ima_cnn': _ima_cnn,
    'resnet18_gn': _resnet18,
    'resnet20_gn': _resnet20,
}
_SHAPES = (((28, 28, 1), 62), ((32, 32, 3), 10))
_CASES = [(n, s, k) for n in image_models.IMAGE_MODELS for s, k in _SHAPES]


@pytest.fixture(scope='module')
def models():
  """Each (name, shape, classes) of `_CASES` built once, seed 0."""
  return {
      (n, s, k): image_models.create_image_model(n, s, k, seed=0)
      for n, s, k in _CASES
  }


def test_every_model_has_a_derivation():
  assert set(_EXPECTED) == set(image_models.IMAGE_MODELS)
  assert image_models.DEFAULT_IMAGE_MODEL == 'cnn'


@pytest.mark.parametrize('name,shape,classes', _CASES)
def test_parameter_count_matches_layer_arithmetic(models, name, shape, classes):
  expected = _EXPECTED[name](shape[0], shape[-1], classes)
  assert models[(name, shape, classes)].count_params() == expected


def test_reference_parameter_counts(models):
  # Hand-added sums of the derivations above, and figures from the literature.
  counts = {key[0:2]: m.count_params() for key, m in models.items()}
  # 320 + 18,496 + 1,179,776 + 7,998: Reddi et al.'s EMNIST cnn_dropout,
  # 1,206,590 as in tff_fedwin/tasks/emnist.py's source.
  assert counts[('cnn_dropout', (28, 28, 1))] == 1_206_590
  # 832 + 51,264 + 6,424,576 + 127,038: LEAF's FEMNIST CNN (~6.6M).
  assert counts[('leaf_cnn', (28, 28, 1))] == 6_603_710
  # IMA Table 4, CIFAR-10 CNN: 4,864 + 102,464 + 614,784 + 49,280 + 1,290.
  assert counts[('ima_cnn', (32, 32, 3))] == 772_682
  # CIFAR ResNet-18: stem 1,856; stages 147,968 + 525,568 + 2,099,712 +
  # 8,393,728; dense 5,130 (the 11.17M usually quoted; BN's trainable
  # parameters are as many as GN's).
  assert counts[('resnet18_gn', (32, 32, 3))] == 11_173_962
  # He et al. 2016 Table 6: ResNet-20 has 0.27M parameters.
  assert counts[('resnet20_gn', (32, 32, 3))] == 269_722


def test_resnets_normalize_in_two_groups(models):
  # IMA Appendix D, Table 4: "GN layers split the input channels into two
  # groups in all models"; no batch normalization left.
  for name in ('resnet18_gn', 'resnet20_gn'):
    layers = models[(name, (32, 32, 3), 10)].layers
    norms = [l for l in layers if 'normalization' in type(l).__name__.lower()]
    assert norms and {type(l) for l in norms} == {
        tf.keras.layers.GroupNormalization
    }
    assert {l.groups for l in norms} == {2}
    # One per convolution: stem, 2 per block (+ 1 per projection shortcut).
    convs = [l for l in layers if isinstance(l, tf.keras.layers.Conv2D)]
    assert (
        len(norms) == len(convs) == {'resnet18_gn': 20, 'resnet20_gn': 19}[name]
    )


@pytest.mark.parametrize('name,shape,classes', _CASES)
def test_outputs_logits_of_shape_batch_by_classes(models, name, shape, classes):
  x = np.random.default_rng(1).random((3, *shape), np.float32)
  out = models[(name, shape, classes)](x, training=False).numpy()
  assert out.shape == (3, classes)
  # Softmax outputs would be positive rows summing to 1.
  assert (out < 0).any()
  assert not np.allclose(out.sum(axis=1), 1.0)


def _weights(model):
  return [w.numpy() for w in model.weights]


@pytest.mark.parametrize('name', image_models.IMAGE_MODELS)
def test_seed_determines_the_weights(models, name):
  # Against the module's seed-0 build: the same seed again, then seed 1.
  first = _weights(models[(name, (32, 32, 3), 10)])
  build = lambda seed: _weights(
      image_models.create_image_model(name, (32, 32, 3), 10, seed=seed)
  )
  again, other = build(0), build(1)
  assert len(first) == len(again) == len(other)
  for a, b in zip(first, again):
    np.testing.assert_array_equal(a, b)
  kernels = [(a, b) for a, b in zip(first, other) if a.ndim > 1]
  assert kernels and all(not np.array_equal(a, b) for a, b in kernels)


def test_cnn_is_the_registry_small_cnn():
  # mnist's and npz's model before --model existed, by its old name: the
  # same function, so old runs' checkpoints keep their variables.
  assert registry.create_mnist_cnn is image_models.create_small_cnn
  ours = image_models.create_image_model('cnn', (28, 28, 1), 7, seed=5)
  theirs = image_models.create_small_cnn((28, 28, 1), 7, seed=5)
  for a, b in zip(_weights(ours), _weights(theirs)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    'shape,classes,expected',
    [
        # 'same' on 8x8: 8 -> 4 -> 2; 160 + 4,640 + (2*2*32*10 + 10).
        ((8, 8), 10, 160 + 4_640 + 1_290),
        # MLP: 64*128 + 128 + 128*10 + 10.
        ((64,), 10, 8_320 + 1_290),
    ],
)
def test_small_cnn_padding_rule_and_mlp(shape, classes, expected):
  model = image_models.create_image_model('cnn', shape, classes)
  assert model.count_params() == expected


def test_cnn_dropout_default_is_emnist_model():
  ours = image_models.create_image_model('cnn_dropout', (28, 28, 1), 62, 2)
  theirs = emnist.create_cnn_dropout_model(62, seed=2)
  for a, b in zip(_weights(ours), _weights(theirs), strict=True):
    np.testing.assert_array_equal(a, b)


# ResNet-18 builds its input like ResNet-20 (`resnet_gn._resnet`); left out
# to save its build time.
@pytest.mark.parametrize(
    'name', [n for n in image_models.IMAGE_MODELS if n != 'resnet18_gn']
)
def test_two_dimensional_images_get_a_channel(name):
  model = image_models.create_image_model(name, (28, 28), 5)
  assert model.count_params() == _EXPECTED[name](28, 1, 5)
  assert model(np.zeros((2, 28, 28), np.float32)).shape == (2, 5)


def test_option_a_shortcut_subsamples_and_zero_pads_channels():
  x = np.random.default_rng(0).random((1, 4, 4, 2), np.float32)
  inputs = tf.keras.Input((4, 4, 2))
  model = tf.keras.Model(inputs, resnet_gn._pad_shortcut(inputs, 5, 2))
  # 3 extra channels: 1 zero channel before, 2 after.
  expected = np.pad(x[:, ::2, ::2, :], [(0, 0), (0, 0), (0, 0), (1, 2)])
  np.testing.assert_array_equal(model(x).numpy(), expected)


@pytest.mark.parametrize(
    'name,shape,match',
    [
        (
            'lenet',
            (28, 28, 1),
            r'^--model must be one of cnn, cnn_dropout, '
            r"leaf_cnn, ima_cnn, resnet18_gn, resnet20_gn, got 'lenet'\.$",
        ),
        (
            'leaf_cnn',
            (784,),
            r'^--model=leaf_cnn takes inputs shaped '
            r'\(height, width\) or \(height, width, channels\) .*\(784,\)\.$',
        ),
        (
            'cnn',
            (2, 8, 8, 1),
            r'^--model=cnn takes inputs shaped \(features,'
            r'\) or .*\(2, 8, 8, 1\)\.$',
        ),
        ('resnet20_gn', (0, 8, 3), r'positive sizes.*\(0, 8, 3\)'),
        (
            'cnn_dropout',
            (16, 16, 1),
            r'^--model=cnn_dropout needs images of '
            r'at least 28x28; the data has 16x16\.$',
        ),
        ('ima_cnn', (15, 32, 3), r'at least 16x16; the data has 15x32'),
        ('leaf_cnn', (3, 3), r'at least 4x4; the data has 3x3'),
    ],
)
def test_check_image_model_errors(name, shape, match):
  with pytest.raises(image_models.ImageModelError, match=match):
    image_models.check_image_model(name, shape)
  with pytest.raises(ValueError, match=match):
    image_models.create_image_model(name, shape, 10)


@pytest.mark.parametrize('name,side', [('cnn_dropout', 28), ('ima_cnn', 16)])
def test_smallest_accepted_images_build(name, side):
  image_models.check_image_model(name, (side, side, 1))
  model = image_models.create_image_model(name, (side, side, 1), 3)
  assert model.count_params() == _EXPECTED[name](side, 1, 3)


def test_num_classes_must_be_positive():
  with pytest.raises(ValueError, match=r'^`num_classes` must be an integer'):
    image_models.create_image_model('cnn', (28, 28, 1), 0)
