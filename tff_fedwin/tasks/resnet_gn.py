"""CIFAR ResNets with group normalization: ResNet-18 (WSM, IMA) and ResNet-20.

Batch normalization is replaced by group normalization, as Hsieh et al. 2020
("The non-IID data quagmire of decentralized machine learning", ICML)
suggest for non-IID federated training and as the papers do:

* WiMA (sec. 4.1.2 "Models"): "a ResNet20 [He et al. 2016] on all the
  distributions of the CIFAR datasets, substituting Batch Normalization with
  Group Normalization layers, as suggested by [Hsieh et al.]".
* WSM (sec. 4, "Settings"): "a ResNet-18", with group or batch normalization
  (a hyperparameter there; group normalization here).
* IMA (sec. 7.1.2 and Appendix D, "Models", Table 4): "ResNet18 [He et al.]
  ... We replace BN layers with GN layers following [Hsieh et al.]"; "Group
  normalization (GN) layers split the input channels into two groups in all
  models".

Every normalization layer here has 2 groups, as IMA's Table 4 states (WiMA
and WSM do not give a number); a layer of `c` channels holds `2 * c`
parameters (scale, offset), as many as the trainable ones of the batch
normalization it replaces, so the counts match the usual BN figures.
Convolutions have no bias (the normalization's offset follows), their kernels
start He-normal (He et al. 2015, as the ResNet paper, sec. 3.4) and the dense
layer Glorot-uniform, each seeded from `seed` plus its index in the model, so a
model is a function of `seed`.
"""

import tensorflow as tf

GROUPS = 2


class _Seeds:
  """Hands out initializers seeded `seed`, `seed + 1`, ... in layer order."""

  def __init__(self, seed: int):
    self._next = seed

  def _take(self) -> int:
    self._next += 1
    return self._next - 1

  def he(self) -> tf.keras.initializers.Initializer:
    return tf.keras.initializers.HeNormal(seed=self._take())

  def glorot(self) -> tf.keras.initializers.Initializer:
    return tf.keras.initializers.GlorotUniform(seed=self._take())


def _conv_gn(x, filters, kernel, stride, seeds, relu=True):
  """Conv (no bias, 'same') -> GroupNorm(GROUPS) [-> ReLU]."""
  x = tf.keras.layers.Conv2D(
      filters,
      kernel,
      strides=stride,
      padding='same',
      use_bias=False,
      kernel_initializer=seeds.he(),
  )(x)
  x = tf.keras.layers.GroupNormalization(groups=GROUPS)(x)
  return tf.keras.layers.ReLU()(x) if relu else x


def _basic_block(x, filters, stride, seeds, shortcut):
  """He et al. 2016's BasicBlock: two 3x3 conv-GN, identity or projection.

  Args:
    x: The block's input, `[batch, h, w, c]`.
    filters: The block's output channels.
    stride: 1, or 2 to halve `h` and `w` in the first convolution.
    seeds: The model's `_Seeds`.
    shortcut: When the shape changes, 'projection' (option B: a 1x1 conv with
      stride and GN) or 'pad' (option A: subsample by `stride`, zero-pad the
      channels; no parameters).

  Returns:
    `relu(F(x) + shortcut(x))`, `[batch, h / stride, w / stride, filters]`.
  """
  in_channels = x.shape[-1]
  y = _conv_gn(x, filters, 3, stride, seeds)
  y = _conv_gn(y, filters, 3, 1, seeds, relu=False)
  if stride != 1 or in_channels != filters:
    if shortcut == 'projection':
      x = _conv_gn(x, filters, 1, stride, seeds, relu=False)
    else:
      x = _pad_shortcut(x, filters, stride)
  return tf.keras.layers.ReLU()(tf.keras.layers.Add()([x, y]))


def _pad_shortcut(x, filters, stride):
  """Option A (He et al. 2016, sec. 4.2): x[:, ::s, ::s], zero channels."""
  extra = filters - x.shape[-1]
  before = extra // 2

  def pad(t):
    t = t[:, ::stride, ::stride, :]
    return tf.pad(t, [[0, 0], [0, 0], [0, 0], [before, extra - before]])

  return tf.keras.layers.Lambda(pad)(x)


def _resnet(
    input_shape, num_classes, seed, *, stem, stages, blocks, shortcut, name
):
  """Stem 3x3 conv-GN-ReLU, stages of BasicBlocks, global pool, logits."""
  seeds = _Seeds(seed)
  inputs = tf.keras.Input(shape=tuple(input_shape))
  x = inputs
  if len(input_shape) == 2:
    x = tf.keras.layers.Reshape((*input_shape, 1))(x)
  x = _conv_gn(x, stem, 3, 1, seeds)
  for index, filters in enumerate(stages):
    for block in range(blocks):
      stride = 2 if index > 0 and block == 0 else 1
      x = _basic_block(x, filters, stride, seeds, shortcut)
  x = tf.keras.layers.GlobalAveragePooling2D()(x)
  logits = tf.keras.layers.Dense(
      num_classes, kernel_initializer=seeds.glorot()
  )(x)
  return tf.keras.Model(inputs, logits, name=name)


def create_resnet18_gn(
    input_shape: tuple[int, ...], num_classes: int, seed: int = 0
) -> tf.keras.Model:
  """ResNet-18, CIFAR variant, with 2-group GN; logits (~11.2M parameters).

  He et al. 2016's 18-layer ResNet (Table 1) as CIFAR code bases build it
  (kuangliu/pytorch-cifar, the WSM and IMA experiments): a 3x3 stride-1 stem
  conv of 64 channels and no max-pool, four stages of 2 BasicBlocks with 64,
  128, 256, 512 channels (stride 2 at the start of stages 2-4, option-B 1x1
  projection shortcuts there), global average pooling, one dense layer.
  IMA's Table 4 puts a linear projector FC(512, 128) before FC(128, 10); this
  is the plain ResNet-18 (dense 512 -> classes) of WSM and He et al.

  Args:
    input_shape: `(h, w, c)` or `(h, w)` (a channel is added).
    num_classes: The number of logits.
    seed: Seeds every initializer.

  Returns:
    A functional `tf.keras.Model` mapping images to `[batch, num_classes]`.
  """
  return _resnet(
      input_shape,
      num_classes,
      seed,
      stem=64,
      stages=(64, 128, 256, 512),
      blocks=2,
      shortcut='projection',
      name='resnet18_gn',
  )


def create_resnet20_gn(
    input_shape: tuple[int, ...], num_classes: int, seed: int = 0
) -> tf.keras.Model:
  """ResNet-20 of He et al. 2016 sec. 4.2 with 2-group GN; logits (~0.27M).

  The CIFAR ResNet with n = 3: a 3x3 conv of 16 channels, three stages of 3
  BasicBlocks with 16, 32, 64 channels (stride 2 at the start of stages 2 and
  3), global average pooling, one dense layer; 6n + 2 = 20 weighted layers.
  Shortcuts are option A, as in He et al.'s CIFAR experiments ("we use
  identity shortcuts in all cases (i.e., option A)", sec. 4.2): where the shape
  changes, the input is subsampled by 2 and its channels zero-padded, with no
  parameters. WiMA (sec. 5.1) names only "a ResNet20 [He et al.]".

  Args:
    input_shape: `(h, w, c)` or `(h, w)` (a channel is added).
    num_classes: The number of logits.
    seed: Seeds every initializer.

  Returns:
    A functional `tf.keras.Model` mapping images to `[batch, num_classes]`.
  """
  return _resnet(
      input_shape,
      num_classes,
      seed,
      stem=16,
      stages=(16, 32, 64),
      blocks=3,
      shortcut='pad',
      name='resnet20_gn',
  )
