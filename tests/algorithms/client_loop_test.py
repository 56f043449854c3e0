"""Tests for `client_loop`: which loop a client runs, `hold`, `replayable`,
`build_client_model`.

WSM reads its dataset twice (class proportions, then training). A second
pass over a shuffled dataset reshuffled with a seed that depended on what the
TFF worker had run before; WSM clients now replay one pass
(`client_loop.replayable`). The execution test re-runs one round on the same
worker, after rounds of the other loss, and requires the same numbers bit for
bit, for both losses and every loop form (without the replay, WSM fails in
TFF's forms).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import softmax_task as task
from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import scaffold

REDUCE = tff.learning.LoopImplementation.DATASET_REDUCE
ITERATOR = tff.learning.LoopImplementation.DATASET_ITERATOR
HELD = client_loop.HELD_BATCHES


class TestClientLoopArguments:

  def test_none_picks_the_held_batches(self):
    assert client_loop.client_loop(None) == HELD

  @pytest.mark.parametrize('loop', [HELD, REDUCE, ITERATOR])
  def test_a_loop_form_is_kept(self, loop):
    assert client_loop.client_loop(loop) == loop

  def test_refuses_a_non_enum_value(self):
    with pytest.raises(ValueError, match='must be one of'):
      client_loop.client_loop('iterator')


def _shuffled_datasets():
  """Every client's examples, shuffled with one fixed seed, 2 epochs."""
  return [
      task.CLIENT_DATA.create_tf_dataset_for_client(c)
      .shuffle(100, seed=5)
      .repeat(2)
      .batch(task.BATCH_SIZE)
      for c in task.CLIENT_IDS
  ]


def _process(client_loss, loop):
  return fed_win.build_fed_win(
      task.model_fn,
      tff.learning.optimizers.build_sgdm(0.1),
      client_loss=client_loss,
      num_classes=task.NUM_CLASSES,
      loop_implementation=loop,
  )


class TestClientLoopExecution:

  @pytest.mark.parametrize('loop', client_loop.LOOP_FORMS)
  @pytest.mark.parametrize('client_loss', ['ce', 'wsm'])
  def test_round_does_not_depend_on_the_workers_history(
      self, client_loss, loop
  ):
    process = _process(client_loss, loop)
    other = _process('ce' if client_loss == 'wsm' else 'wsm', loop)
    state = process.initialize()
    other_state = other.initialize()
    first = process.get_model_weights(
        process.next(state, _shuffled_datasets()).state
    )
    # The same round again, after history on the worker: this round, and
    # the other loss's rounds on datasets with the same seed.
    for _ in range(3):
      again = process.get_model_weights(
          process.next(state, _shuffled_datasets()).state
      )
      for a, b in zip(first.trainable, again.trainable):
        np.testing.assert_array_equal(a, b)
      other_state = other.next(other_state, _shuffled_datasets()).state


def _replay(dataset):
  """`replayable(dataset)` built in a graph, as TFF's clients build it."""
  return tf.function(client_loop.replayable)(dataset)


def _elements(dataset):
  """The elements of one pass, as numpy (eager)."""
  return list(dataset.as_numpy_iterator())


def _assert_same_elements(actual, expected):
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    tf.nest.assert_same_structure(a, e)
    for a_value, e_value in zip(tf.nest.flatten(a), tf.nest.flatten(e)):
      np.testing.assert_array_equal(a_value, e_value)
      assert a_value.dtype == e_value.dtype


def _batched(num_examples, batch_size):
  """Batches of `(x [b, 2, 3] float, y [b] int)` from numpy: x[i] = 6i..6i+5."""
  x = np.arange(num_examples * 6, dtype=np.float32).reshape(-1, 2, 3)
  y = np.arange(num_examples, dtype=np.int32) % 3
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)
  ).batch(batch_size)


@tf.function
def _hold_and_read(dataset):
  """`hold(dataset)`: (count, its first two elements, all its labels)."""
  held = client_loop.hold(dataset)
  return held.num_elements, [held.element(0), held.element(1)], held.labels()


class TestHold:

  def test_elements_in_order_and_labels_of_mapping_batches(self):
    count, elements, labels = _hold_and_read(_batched(7, 4))
    # Expected from numpy: batches [0, 4) and [4, 7); labels i % 3.
    x = np.arange(42, dtype=np.float32).reshape(7, 2, 3)
    y = np.arange(7, dtype=np.int32) % 3
    assert count.numpy() == 2
    _assert_same_elements(
        tf.nest.map_structure(lambda t: t.numpy(), elements),
        [
            collections.OrderedDict(x=x[:4], y=y[:4]),
            collections.OrderedDict(x=x[4:], y=y[4:]),
        ],
    )
    np.testing.assert_array_equal(labels.numpy(), y)
    assert labels.dtype == tf.int32

  def test_labels_of_tuple_batches_are_their_second_component(self):
    x = np.arange(5, dtype=np.float32)
    y = np.array([[2], [0], [1], [1], [0]], np.int64)  # Labels [b, 1].
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(3)
    count, _, labels = _hold_and_read(dataset)
    assert count.numpy() == 2
    np.testing.assert_array_equal(labels.numpy(), [2, 0, 1, 1, 0])

  def test_an_empty_dataset_holds_no_elements(self):
    held = tf.function(
        lambda d: (lambda h: (h.num_elements, h.labels()))(client_loop.hold(d))
    )(_batched(7, 4).take(0))
    assert held[0].numpy() == 0
    assert held[1].shape == (0,)


class TestWithoutTfDataRewrites:

  def test_turns_off_rewrites_and_autotuning_even_if_set_upstream(self):
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = True
    options.autotune.enabled = True
    dataset = tf.data.Dataset.range(5).with_options(options)
    read = client_loop.without_tf_data_rewrites(dataset).options()
    assert read.experimental_optimization.apply_default_optimizations is False
    assert read.autotune.enabled is False

  def test_hold_reads_a_shuffled_parallel_pipeline_as_tf_data_does(self):
    def pipeline():  # Rewrites would fuse, parallelize and tune these.
      return (
          tf.data.Dataset.range(40)
          .shuffle(40, seed=3)
          .map(
              lambda i: collections.OrderedDict(
                  x=tf.cast(i, tf.float32) * 2, y=tf.cast(i % 3, tf.int32)
              ),
              num_parallel_calls=tf.data.AUTOTUNE,
          )
          .map(lambda e: e)
          .batch(6)
      )

    held = tf.function(lambda d: client_loop.hold(d).as_dataset())(pipeline())
    # A fresh pipeline read eagerly with tf.data's default options.
    _assert_same_elements(_elements(held), _elements(pipeline()))


class TestReplayable:

  def test_replays_the_batches_in_order_with_a_short_last_one(self):
    replayed = _replay(_batched(7, 4))
    # Expected from numpy: batches [0, 4) and [4, 7).
    x = np.arange(42, dtype=np.float32).reshape(7, 2, 3)
    y = np.arange(7, dtype=np.int32) % 3
    expected = [
        collections.OrderedDict(x=x[:4], y=y[:4]),
        collections.OrderedDict(x=x[4:], y=y[4:]),
    ]
    _assert_same_elements(_elements(replayed), expected)

  def test_keeps_the_element_spec(self):
    dataset = _batched(7, 4)
    assert _replay(dataset).element_spec == dataset.element_spec

  def test_replays_scalar_and_tuple_elements(self):
    dataset = tf.data.Dataset.from_tensor_slices(
        (np.array([3, 1, 2], np.int64), np.array([0.5, 1.5, 2.5], np.float64))
    )
    expected = [(3, 0.5), (1, 1.5), (2, 2.5)]
    _assert_same_elements(
        _elements(_replay(dataset)),
        [(np.int64(a), np.float64(b)) for a, b in expected],
    )

  def test_an_empty_dataset_replays_as_empty(self):
    dataset = _batched(7, 4).take(0)
    replayed = _replay(dataset)
    assert not _elements(replayed)
    assert replayed.element_spec == dataset.element_spec

  def test_every_pass_reads_the_first_shuffle(self):
    def shuffled():
      return _batched(20, 1).unbatch().shuffle(20, seed=5).batch(6)

    replayed = _replay(shuffled())
    first_shuffle = _elements(shuffled())  # A fresh dataset's first pass.
    reshuffled = _elements(shuffled().repeat(2))[4:]  # Its second pass.
    assert not all(  # The data do reshuffle on a second pass.
        np.array_equal(a['x'], b['x'])
        for a, b in zip(reshuffled, first_shuffle)
    )
    _assert_same_elements(_elements(replayed), first_shuffle)
    _assert_same_elements(_elements(replayed), first_shuffle)

  def test_refuses_ragged_elements(self):
    dataset = tf.data.Dataset.from_tensor_slices(
        tf.ragged.constant([[1, 2], [3]])
    ).batch(2)
    with pytest.raises(TypeError, match='dense tensors'):
      client_loop.replayable(dataset)


# build_client_model: which initial values change. The model: Dense(3) with
# Glorot-uniform kernel and bias initialized to ones (trainable),
# BatchNormalization (trainable gamma = 1, beta = 0; non-trainable moving mean 0
# and moving variance 1) and a trainable `tf.Variable` created from a tensor
# with no `shape` argument. Expected initial values are the initializers'
# definitions: zeros for every trainable variable created with a known shape and
# dtype, the variable's own value for the others.

INPUT_DIM = 2
# The value of the variable created without a shape (kept as it is).
OWN_VALUE = np.array([1.5, -2.0], np.float32)


class _Shapeless(tf.keras.layers.Layer):
  """Identity holding a trainable tf.Variable created from a tensor."""

  def build(self, input_shape):
    self.own = tf.Variable(tf.constant(OWN_VALUE), trainable=True, name='own')

  def call(self, inputs):
    return inputs


def _model_fn():
  keras_model = tf.keras.Sequential(
      [
          tf.keras.layers.InputLayer(input_shape=(INPUT_DIM,)),
          _Shapeless(),
          tf.keras.layers.Dense(3, bias_initializer='ones'),
          tf.keras.layers.BatchNormalization(),
      ]
  )
  return tff.learning.models.from_keras_model(
      keras_model,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, INPUT_DIM], tf.float32),
          y=tf.TensorSpec([None], tf.int32),
      ),
  )


def _initial_values(build):
  """{variable name: initial value} and the graph's op types, after `build`."""
  with tf.Graph().as_default() as graph:
    model = build()
    variables = model.trainable_variables + model.non_trainable_variables
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.initializers.variables(variables))
      values = session.run({v.name.split(':')[0]: v for v in variables})
    return values, {op.type for op in graph.get_operations()}


def _expected_client_values():
  return {
      'dense/kernel': np.zeros([INPUT_DIM, 3], np.float32),
      'dense/bias': np.zeros([3], np.float32),
      'batch_normalization/gamma': np.zeros([3], np.float32),
      'batch_normalization/beta': np.zeros([3], np.float32),
      'batch_normalization/moving_mean': np.zeros([3], np.float32),
      'batch_normalization/moving_variance': np.ones([3], np.float32),
  }


def test_trainable_variables_with_known_shape_start_at_zero():
  values, _ = _initial_values(lambda: client_loop.build_client_model(_model_fn))
  expected = _expected_client_values()
  for name, value in expected.items():
    matches = [v for n, v in values.items() if n.endswith(name)]
    assert len(matches) == 1, (name, sorted(values))
    np.testing.assert_array_equal(matches[0], value, err_msg=name)
  (own,) = [v for n, v in values.items() if n.endswith('own')]
  np.testing.assert_array_equal(own, OWN_VALUE)


@pytest.mark.parametrize(
    'build, random_ops',
    [
        (lambda: client_loop.build_client_model(_model_fn), False),
        (_model_fn, True),  # The check can fail: model_fn() draws Glorot.
    ],
    ids=['client_model', 'plain_model_fn'],
)
def test_no_random_initializer_in_the_graph(build, random_ops):
  _, op_types = _initial_values(build)
  random = sorted(t for t in op_types if 'Random' in t)
  assert bool(random) == random_ops, random


def test_plain_model_fn_kernel_is_not_zero():
  # Guards the test above: the Glorot kernel differs from the zeros expected.
  values, _ = _initial_values(_model_fn)
  (kernel,) = [v for n, v in values.items() if n.endswith('dense/kernel')]
  assert np.any(kernel != 0.0)
