"""Tests for tff_fedwin.algorithms.scaffold.

Every number is checked against `_np_client_update` / `_np_server_update`, an
independent float64 numpy SCAFFOLD (Karimireddy et al. 2020, Algorithm 1,
option II) written from DESIGN.md sec. 2.3 for a linear softmax model; with
WSM clients its gradient is the re-weighted softmax gradient derived below
(DESIGN.md sec. 2.2), and `_np_simulate` adds the window (DESIGN.md sec. 2.1)
with `tests.numpy_reference.window_mean_eq4`.
"""

import collections
from typing import Any, NamedTuple

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import numpy_reference as ref
from tff_fedwin import training
from tff_fedwin.aggregators import window as window_lib
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.algorithms import scaffold

NUM_FEATURES = 3
NUM_CLASSES = 3
TOTAL_CLIENTS = 4
CLIENT_LEARNING_RATE = 0.1
ATOL = 1e-5
CLIENT_IDS = tuple(f'client_{i}' for i in range(TOTAL_CLIENTS))
# Two clients per round; every client is sampled at least twice.
SAMPLING_SCHEDULE = ((0, 1), (2, 3), (1, 3), (0, 2), (3, 0))

_RNG = np.random.default_rng(1234)
INITIAL_KERNEL = (0.3 * _RNG.normal(size=(NUM_FEATURES, NUM_CLASSES))).astype(
    np.float32
)
INITIAL_BIAS = (0.1 * _RNG.normal(size=(NUM_CLASSES,))).astype(np.float32)


def _make_client_data(num_examples: int, batch_size: int):
  x = _RNG.normal(size=(num_examples, NUM_FEATURES)).astype(np.float32)
  y = _RNG.integers(0, NUM_CLASSES, size=(num_examples,)).astype(np.int32)
  return x, y, batch_size


# (x, y, batch_size): 2 full batches; 3 batches with a partial last one;
# 1 batch; 3 batches with a partial last one.
CLIENT_DATA = (
    _make_client_data(6, 3),
    _make_client_data(5, 2),
    _make_client_data(4, 4),
    _make_client_data(7, 3),
)
EMPTY_DATA = (
    np.zeros((0, NUM_FEATURES), np.float32),
    np.zeros((0,), np.int32),
    2,
)

_INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, NUM_FEATURES], tf.float32),
    y=tf.TensorSpec([None], tf.int32),
)


class _ExampleCounter(tf.keras.layers.Layer):
  """Identity layer with a non-trainable weight counting training examples."""

  def build(self, input_shape):
    self.count = self.add_weight(
        name='count', shape=(), initializer='zeros', trainable=False
    )

  def call(self, inputs, training=None):
    if training:
      self.count.assign_add(tf.cast(tf.shape(inputs)[0], tf.float32))
    return inputs


def _model_fn(with_counter: bool = False, input_spec=None):
  layers = [tf.keras.layers.InputLayer(input_shape=(NUM_FEATURES,))]
  if with_counter:
    layers.append(_ExampleCounter())
  layers.append(
      tf.keras.layers.Dense(
          NUM_CLASSES,
          kernel_initializer=tf.keras.initializers.Constant(INITIAL_KERNEL),
          bias_initializer=tf.keras.initializers.Constant(INITIAL_BIAS),
      )
  )
  return tff.learning.models.from_keras_model(
      tf.keras.Sequential(layers),
      input_spec=_INPUT_SPEC if input_spec is None else input_spec,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
  )


def _dataset(data) -> tf.data.Dataset:
  x, y, batch_size = data
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)
  ).batch(batch_size)


# ----------------------------------------------------------------------------
# Independent numpy SCAFFOLD for logits = x @ W + b, mean softmax cross-entropy.
# Parameters are lists [W, b] of float64 arrays.


class _NpClientResult(NamedTuple):
  model_delta: Any
  control_delta: Any
  new_control: Any
  weight: float
  num_examples: int
  loss_sum: float


def _np_loss_and_gradients(params, x, y):
  kernel, bias = params
  logits = x.astype(np.float64) @ kernel + bias
  logits -= logits.max(axis=1, keepdims=True)
  probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  n = len(y)
  loss = -np.mean(np.log(probs[np.arange(n), y]))
  dlogits = probs.copy()
  dlogits[np.arange(n), y] -= 1.0
  dlogits /= n
  return loss, [x.astype(np.float64).T @ dlogits, dlogits.sum(axis=0)]


def _np_class_proportions(y):
  """WSM's beta_c = n_c / n over a client's whole dataset."""
  return np.bincount(y, minlength=NUM_CLASSES) / len(y)


def _np_wsm_gradients(params, x, y, beta):
  """Gradients of the batch mean of -log softmax(z + log beta)_y, z = xW + b.

  Derivation: softmax(z + log beta)_j = beta_j e^{z_j} / sum_c beta_c e^{z_c}
  =: p_beta_j, so l = -z_y - log beta_y + log sum_c beta_c e^{z_c} and
  dl/dz_j = beta_j e^{z_j} / sum_c beta_c e^{z_c} - [j == y]
          = p_beta_j - onehot_j.
  A class with beta_c = 0 has p_beta_c = 0 exactly (computed here as a product
  with beta, no log). With z = x W + b and the batch mean over b examples:
  dL/dW = x^T (p_beta - onehot) / b, dL/db = sum_rows(p_beta - onehot) / b.
  """
  kernel, bias = params
  x = x.astype(np.float64)
  logits = x @ kernel + bias
  weighted = beta * np.exp(logits - logits.max(axis=1, keepdims=True))
  p_beta = weighted / weighted.sum(axis=1, keepdims=True)
  n = len(y)
  dlogits = p_beta.copy()
  dlogits[np.arange(n), y] -= 1.0
  dlogits /= n
  return [x.T @ dlogits, dlogits.sum(axis=0)]


def _np_batches(data):
  x, y, batch_size = data
  return [
      (x[i : i + batch_size], y[i : i + batch_size])
      for i in range(0, len(y), batch_size)
  ]


def _np_client_update(
    server_params, server_control, client_control, data, client_loss='ce'
):
  """SCAFFOLD client: local corrected SGD, then option-II control update.

  With client_loss='wsm' the step uses the WSM gradient with the client's
  class proportions; the reported loss stays the plain cross-entropy.
  """
  lr = CLIENT_LEARNING_RATE
  y_params = [p.copy() for p in server_params]
  num_steps, num_examples, loss_sum = 0, 0, 0.0
  if client_loss == 'wsm' and len(data[1]):
    beta = _np_class_proportions(data[1])
  for x_batch, y_batch in _np_batches(data):
    loss, grads = _np_loss_and_gradients(y_params, x_batch, y_batch)
    if client_loss == 'wsm':
      grads = _np_wsm_gradients(y_params, x_batch, y_batch, beta)
    loss_sum += loss * len(y_batch)
    num_examples += len(y_batch)
    y_params = [
        p - lr * (g - ci + c)
        for p, g, ci, c in zip(y_params, grads, client_control, server_control)
    ]
    num_steps += 1
  if num_steps == 0:
    zeros = [np.zeros_like(p) for p in server_params]
    return _NpClientResult(zeros, zeros, list(client_control), 0.0, 0, 0.0)
  new_control = [
      ci - c + (x - y) / (num_steps * lr)
      for ci, c, x, y in zip(
          client_control, server_control, server_params, y_params
      )
  ]
  return _NpClientResult(
      model_delta=[y - x for y, x in zip(y_params, server_params)],
      control_delta=[n - o for n, o in zip(new_control, client_control)],
      new_control=new_control,
      weight=1.0,
      num_examples=num_examples,
      loss_sum=loss_sum,
  )


def _np_server_update(server_params, server_control, results, server_lr):
  """SCAFFOLD server: x += lr_g * mean(dy) over clients with data; c += sum(dc)/N."""
  with_data = [r for r in results if r.weight > 0]
  new_params = [p.copy() for p in server_params]
  if with_data:
    for j in range(len(new_params)):
      new_params[j] += server_lr * np.mean(
          [r.model_delta[j] for r in with_data], axis=0
      )
  new_control = [
      c + sum(r.control_delta[j] for r in results) / TOTAL_CLIENTS
      for j, c in enumerate(server_control)
  ]
  return new_params, new_control


def _np_zeros():
  return [
      np.zeros((NUM_FEATURES, NUM_CLASSES)),
      np.zeros((NUM_CLASSES,)),
  ]


def _np_initial_params():
  return [INITIAL_KERNEL.astype(np.float64), INITIAL_BIAS.astype(np.float64)]


def _sampled(round_num):
  """The client indices sampled in round t = 1, 2, ... (schedule repeats)."""
  return SAMPLING_SCHEDULE[(round_num - 1) % len(SAMPLING_SCHEDULE)]


class _NpRound(NamedTuple):
  """What numpy expects after round t."""

  global_params: Any  # x^t, the model the clients start round t + 1 from.
  control: Any  # c.
  client_controls: Any  # c_i of every client.
  window_params: Any  # The window model (w^t while inactive / no window).
  window_fill: int
  window_active: bool
  window_distance: float  # ||window model - w^t||_2.
  train_loss: float
  num_examples: int


def _np_simulate(
    rounds,
    *,
    client_loss='ce',
    window_size=None,
    mode='evaluate',
    start_round=0,
    server_learning_rate=1.0,
):
  """SCAFFOLD (+ WSM clients) (+ window) for `rounds` rounds, in float64.

  The window holds the post-server-step models w^t (`aggregated[t]`); it is
  active at t >= max(W, start_round), where the window model is WiMA Eq. 4;
  in 'broadcast' mode (IMA) the next round starts from it, in 'evaluate' mode
  from w^t. The window never touches c or the c_i.
  """
  x = _np_initial_params()
  control = _np_zeros()
  client_controls = [_np_zeros() for _ in range(TOTAL_CLIENTS)]
  aggregated = [x]
  history = []
  for t in range(1, rounds + 1):
    sampled = _sampled(t)
    results = [
        _np_client_update(
            x, control, client_controls[i], CLIENT_DATA[i], client_loss
        )
        for i in sampled
    ]
    w_t, control = _np_server_update(
        x, control, results, server_learning_rate
    )
    for i, r in zip(sampled, results):
      client_controls[i] = r.new_control
    aggregated.append(w_t)
    active = window_size is not None and t >= max(window_size, start_round)
    if active:
      window_params = [
          ref.window_mean_eq4([m[j] for m in aggregated], t, window_size)
          for j in range(len(w_t))
      ]
    else:
      window_params = w_t
    x = window_params if (active and mode == 'broadcast') else w_t
    num_examples = sum(r.num_examples for r in results)
    history.append(
        _NpRound(
            global_params=x,
            control=control,
            client_controls=[list(c) for c in client_controls],
            window_params=window_params,
            window_fill=min(t, window_size or 0),
            window_active=active,
            window_distance=np.sqrt(
                sum(np.sum((m - w) ** 2) for m, w in zip(window_params, w_t))
            ),
            train_loss=sum(r.loss_sum for r in results) / num_examples,
            num_examples=num_examples,
        )
    )
  return history


# ----------------------------------------------------------------------------


def _assert_close(actual, expected):
  actual = list(actual)
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(a, e, rtol=0, atol=ATOL)


def _server_state(params, control, non_trainable=(), round_num=0):
  """A `ScaffoldServerState` of numpy values, to start `next` anywhere."""
  return scaffold.ScaffoldServerState(
      global_model_weights=tff.learning.models.ModelWeights(
          trainable=[np.asarray(p, np.float32) for p in params],
          non_trainable=[np.asarray(v, np.float32) for v in non_trainable],
      ),
      control_variate=[np.asarray(c, np.float32) for c in control],
      round_num=np.int64(round_num),
  )


def _client_state(control):
  return scaffold.ScaffoldClientState(
      control_variate=[np.asarray(c, np.float32) for c in control]
  )


def _nonzero_controls(seed):
  rng = np.random.default_rng(seed)
  return [
      0.2 * rng.normal(size=(NUM_FEATURES, NUM_CLASSES)),
      0.2 * rng.normal(size=(NUM_CLASSES,)),
  ]


@pytest.fixture(scope='module')
def build_process():
  """Builds each process configuration once per module."""
  cache = {}

  def build(server_learning_rate=1.0, with_counter=False, **kwargs):
    key = (server_learning_rate, with_counter, tuple(sorted(kwargs.items())))
    if key not in cache:
      cache[key] = scaffold.build_scaffold(
          lambda: _model_fn(with_counter),
          client_learning_rate=CLIENT_LEARNING_RATE,
          server_learning_rate=server_learning_rate,
          total_clients=TOTAL_CLIENTS,
          **kwargs,
      )
    return cache[key]

  return build


def _run_rounds(process, rounds):
  """Runs `process` with the sampling schedule; yields (t, state, store, metrics)."""
  store = training.ClientStateStore(scaffold.initial_client_state(_model_fn))
  state = process.initialize()
  for t in range(1, rounds + 1):
    sampled_ids = [CLIENT_IDS[i] for i in _sampled(t)]
    state, new_client_states, metrics = process.next(
        state,
        [_dataset(CLIENT_DATA[i]) for i in _sampled(t)],
        store.get(sampled_ids),
    )
    store.update(sampled_ids, new_client_states)
    yield t, state, store, metrics


def _assert_round_matches(t, state, store, expected, with_window):
  """x, c, every client's c_i and the window model equal numpy after round t."""
  try:
    _assert_close(state.global_model_weights.trainable, expected.global_params)
    _assert_close(state.control_variate, expected.control)
    for i, cid in enumerate(CLIENT_IDS):
      (client_state,) = store.get([cid])
      _assert_close(client_state.control_variate, expected.client_controls[i])
    _assert_close(
        scaffold.get_model_weights(state).trainable, expected.window_params
    )
    if with_window:
      _assert_close(
          window_model_weights(state).trainable, expected.window_params
      )
  except AssertionError as e:
    raise AssertionError(f'round {t}: {e}') from e


# Client step as a plain tf.function.


@pytest.mark.parametrize('client_index', range(TOTAL_CLIENTS))
@pytest.mark.parametrize('zero_controls', [True, False])
def test_client_update_matches_numpy(client_index, zero_controls):
  params = _np_initial_params()
  server_control = _np_zeros() if zero_controls else _nonzero_controls(1)
  client_control = _np_zeros() if zero_controls else _nonzero_controls(2)
  client_update = scaffold.build_scaffold_client_update(
      _model_fn, CLIENT_LEARNING_RATE
  )

  new_state, result = client_update(
      tff.learning.models.ModelWeights(
          trainable=[tf.constant(p, tf.float32) for p in params],
          non_trainable=[],
      ),
      [tf.constant(c, tf.float32) for c in server_control],
      _client_state(client_control),
      _dataset(CLIENT_DATA[client_index]),
  )

  expected = _np_client_update(
      params, server_control, client_control, CLIENT_DATA[client_index]
  )
  _assert_close(result.model_delta, expected.model_delta)
  _assert_close(result.control_variate_delta, expected.control_delta)
  _assert_close(new_state.control_variate, expected.new_control)
  assert result.client_weight.numpy() == 1.0
  assert result.num_examples.numpy() == expected.num_examples
  np.testing.assert_allclose(result.loss_sum.numpy(), expected.loss_sum,
                             rtol=1e-5)


def test_client_update_on_empty_dataset_changes_nothing():
  client_control = _nonzero_controls(2)
  client_update = scaffold.build_scaffold_client_update(
      _model_fn, CLIENT_LEARNING_RATE
  )

  new_state, result = client_update(
      tff.learning.models.ModelWeights(
          trainable=[tf.constant(p, tf.float32) for p in _np_initial_params()],
          non_trainable=[],
      ),
      [tf.constant(c, tf.float32) for c in _nonzero_controls(1)],
      _client_state(client_control),
      _dataset(EMPTY_DATA),
  )

  _assert_close(result.model_delta, _np_zeros())
  _assert_close(result.control_variate_delta, _np_zeros())
  _assert_close(new_state.control_variate, client_control)
  assert result.client_weight.numpy() == 0.0
  assert result.num_examples.numpy() == 0
  assert result.loss_sum.numpy() == 0.0


def test_wsm_test_data_has_clients_with_absent_classes():
  # So that the WSM tests below exercise the beta_c = 0 masking.
  counts = [np.bincount(y, minlength=NUM_CLASSES) for _, y, _ in CLIENT_DATA]
  assert any((c == 0).any() for c in counts)
  assert any((c > 0).all() for c in counts)


@pytest.mark.parametrize('client_index', range(TOTAL_CLIENTS))
@pytest.mark.parametrize('zero_controls', [True, False])
def test_client_update_with_wsm_matches_numpy(client_index, zero_controls):
  params = _np_initial_params()
  server_control = _np_zeros() if zero_controls else _nonzero_controls(1)
  client_control = _np_zeros() if zero_controls else _nonzero_controls(2)
  client_update = scaffold.build_scaffold_client_update(
      _model_fn, CLIENT_LEARNING_RATE, client_loss='wsm',
      num_classes=NUM_CLASSES,
  )

  new_state, result = client_update(
      tff.learning.models.ModelWeights(
          trainable=[tf.constant(p, tf.float32) for p in params],
          non_trainable=[],
      ),
      [tf.constant(c, tf.float32) for c in server_control],
      _client_state(client_control),
      _dataset(CLIENT_DATA[client_index]),
  )

  expected = _np_client_update(
      params, server_control, client_control, CLIENT_DATA[client_index],
      client_loss='wsm',
  )
  _assert_close(result.model_delta, expected.model_delta)
  _assert_close(result.control_variate_delta, expected.control_delta)
  _assert_close(new_state.control_variate, expected.new_control)


def test_client_update_with_wsm_reports_plain_cross_entropy():
  client_update = scaffold.build_scaffold_client_update(
      _model_fn, CLIENT_LEARNING_RATE, client_loss='wsm',
      num_classes=NUM_CLASSES,
  )

  _, result = client_update(
      tff.learning.models.ModelWeights(
          trainable=[tf.constant(p, tf.float32) for p in _np_initial_params()],
          non_trainable=[],
      ),
      [tf.constant(c, tf.float32) for c in _np_zeros()],
      _client_state(_np_zeros()),
      _dataset(CLIENT_DATA[0]),
  )

  # loss_sum: sum over batches of (plain CE on raw logits, before the step)
  # * batch size, along the WSM trajectory.
  expected = _np_client_update(
      _np_initial_params(), _np_zeros(), _np_zeros(), CLIENT_DATA[0],
      client_loss='wsm',
  )
  assert result.num_examples.numpy() == expected.num_examples
  np.testing.assert_allclose(
      result.loss_sum.numpy(), expected.loss_sum, rtol=1e-5
  )


def test_client_update_with_wsm_reads_labels_of_tuple_batches():
  tuple_spec = (_INPUT_SPEC['x'], _INPUT_SPEC['y'])
  x, y, batch_size = CLIENT_DATA[0]
  client_update = scaffold.build_scaffold_client_update(
      lambda: _model_fn(input_spec=tuple_spec),
      CLIENT_LEARNING_RATE,
      client_loss='wsm',
      num_classes=NUM_CLASSES,
  )

  _, result = client_update(
      tff.learning.models.ModelWeights(
          trainable=[tf.constant(p, tf.float32) for p in _np_initial_params()],
          non_trainable=[],
      ),
      [tf.constant(c, tf.float32) for c in _np_zeros()],
      _client_state(_np_zeros()),
      tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size),
  )

  expected = _np_client_update(
      _np_initial_params(), _np_zeros(), _np_zeros(), CLIENT_DATA[0],
      client_loss='wsm',
  )
  _assert_close(result.model_delta, expected.model_delta)


# Server step as a plain tf.function.


def test_server_update_without_client_data_keeps_model():
  weights = tff.learning.models.ModelWeights(
      trainable=[tf.constant([1.0, 2.0])], non_trainable=[tf.constant(3.0)]
  )

  new_weights, new_control = scaffold.scaffold_server_update(
      weights,
      [tf.constant([0.5, 0.5])],
      [tf.constant([0.0, 0.0])],
      [tf.constant(0.0)],
      [tf.constant([0.4, -0.8])],
      tf.constant(0.0),
      server_learning_rate=1.0,
      total_clients=4,
  )

  _assert_close(new_weights.trainable, [[1.0, 2.0]])
  _assert_close(new_weights.non_trainable, [3.0])
  _assert_close(new_control, [[0.6, 0.3]])


def test_server_update_averages_with_client_weights():
  weights = tff.learning.models.ModelWeights(
      trainable=[tf.constant([1.0, 2.0])], non_trainable=[tf.constant(3.0)]
  )

  new_weights, new_control = scaffold.scaffold_server_update(
      weights,
      [tf.constant([0.5, 0.5])],
      [tf.constant([0.2, 0.4])],  # Sum of two clients' deltas.
      [tf.constant(9.0)],  # Sum of two clients' non-trainable values.
      [tf.constant([0.4, -0.8])],
      tf.constant(2.0),
      server_learning_rate=0.5,
      total_clients=4,
  )

  _assert_close(new_weights.trainable, [[1.05, 2.1]])
  _assert_close(new_weights.non_trainable, [4.5])
  _assert_close(new_control, [[0.6, 0.3]])


# The TFF process.


def test_next_type_signature_places_state_data_and_client_states(
    build_process,
):
  process = build_process()
  param = process.next.type_signature.parameter
  result = process.next.type_signature.result
  state_type = process.initialize.type_signature.result
  weights_type = tff.learning.models.weights_type_from_model(_model_fn)
  client_state_type = tff.types.to_type(
      scaffold.ScaffoldClientState(control_variate=weights_type.trainable)
  )

  assert isinstance(process, tff.templates.IterativeProcess)
  tff.test.assert_types_identical(param[0], state_type)
  tff.test.assert_types_identical(
      state_type.member.global_model_weights, weights_type
  )
  tff.test.assert_types_identical(
      param[1],
      tff.FederatedType(
          tff.SequenceType(tff.types.tensorflow_to_type(_INPUT_SPEC)),
          tff.CLIENTS,
      ),
  )
  tff.test.assert_types_identical(
      param[2], tff.FederatedType(client_state_type, tff.CLIENTS)
  )
  tff.test.assert_types_identical(result[0], state_type)
  tff.test.assert_types_identical(result[1], param[2])
  tff.test.assert_types_identical(
      result[2],
      tff.FederatedType(
          tff.to_type(
              collections.OrderedDict(
                  train_loss=np.float32,
                  num_examples=np.int64,
                  num_clients_with_data=np.int32,
              )
          ),
          tff.SERVER,
      ),
  )


def test_initialize_uses_model_weights_and_zero_control_variate(build_process):
  state = build_process().initialize()

  assert isinstance(state, scaffold.ScaffoldServerState)
  weights = scaffold.get_model_weights(state)
  assert isinstance(weights, tff.learning.models.ModelWeights)
  _assert_close(weights.trainable, _np_initial_params())
  assert list(weights.non_trainable) == []
  _assert_close(state.control_variate, _np_zeros())
  assert state.round_num == 0


def test_initial_client_state_is_zeros_of_trainable_weights():
  state = scaffold.initial_client_state(_model_fn)

  assert isinstance(state, scaffold.ScaffoldClientState)
  assert [c.shape for c in state.control_variate] == [
      (NUM_FEATURES, NUM_CLASSES),
      (NUM_CLASSES,),
  ]
  assert all(c.dtype == np.float32 for c in state.control_variate)
  _assert_close(state.control_variate, _np_zeros())


@pytest.mark.parametrize('server_learning_rate', [1.0, 0.5])
def test_rounds_match_numpy_scaffold(build_process, server_learning_rate):
  process = build_process(server_learning_rate)
  store = training.ClientStateStore(scaffold.initial_client_state(_model_fn))
  state = process.initialize()
  np_params = _np_initial_params()
  np_control = _np_zeros()
  np_client_controls = [_np_zeros() for _ in range(TOTAL_CLIENTS)]

  for round_num, sampled in enumerate(SAMPLING_SCHEDULE, start=1):
    sampled_ids = [CLIENT_IDS[i] for i in sampled]
    unsampled = [i for i in range(TOTAL_CLIENTS) if i not in sampled]
    before = {i: store.get([CLIENT_IDS[i]])[0] for i in unsampled}
    state, new_client_states, metrics = process.next(
        state,
        [_dataset(CLIENT_DATA[i]) for i in sampled],
        store.get(sampled_ids),
    )
    store.update(sampled_ids, new_client_states)

    results = [
        _np_client_update(
            np_params, np_control, np_client_controls[i], CLIENT_DATA[i]
        )
        for i in sampled
    ]
    np_params, np_control = _np_server_update(
        np_params, np_control, results, server_learning_rate
    )
    for i, r in zip(sampled, results):
      np_client_controls[i] = r.new_control

    assert state.round_num == round_num
    _assert_close(scaffold.get_model_weights(state).trainable, np_params)
    _assert_close(state.control_variate, np_control)
    for i in range(TOTAL_CLIENTS):
      (client_state,) = store.get([CLIENT_IDS[i]])
      _assert_close(client_state.control_variate, np_client_controls[i])
    for i, old in before.items():
      (client_state,) = store.get([CLIENT_IDS[i]])
      for new_leaf, old_leaf in zip(
          client_state.control_variate, old.control_variate
      ):
        np.testing.assert_array_equal(new_leaf, old_leaf)
    # c stays the mean of all N client control variates.
    mean_client_control = [
        np.mean([store.get([cid])[0].control_variate[j] for cid in CLIENT_IDS],
                axis=0)
        for j in range(2)
    ]
    _assert_close(state.control_variate, mean_client_control)
    assert metrics['num_examples'] == sum(r.num_examples for r in results)
    assert metrics['num_clients_with_data'] == len(sampled)
    np.testing.assert_allclose(
        metrics['train_loss'],
        sum(r.loss_sum for r in results) / sum(r.num_examples for r in results),
        rtol=1e-5,
    )


def test_round_with_an_empty_client_ignores_it(build_process):
  process = build_process()
  params = _np_initial_params()
  server_control = _nonzero_controls(1)
  client_controls = [_nonzero_controls(2), _nonzero_controls(3)]
  data = [EMPTY_DATA, CLIENT_DATA[1]]

  state, new_client_states, metrics = process.next(
      _server_state(params, server_control),
      [_dataset(d) for d in data],
      [_client_state(c) for c in client_controls],
  )

  results = [
      _np_client_update(params, server_control, c, d)
      for c, d in zip(client_controls, data)
  ]
  expected_params, expected_control = _np_server_update(
      params, server_control, results, 1.0
  )
  _assert_close(state.global_model_weights.trainable, expected_params)
  _assert_close(state.control_variate, expected_control)
  _assert_close(new_client_states[0].control_variate, client_controls[0])
  _assert_close(new_client_states[1].control_variate, results[1].new_control)
  assert metrics['num_clients_with_data'] == 1
  assert metrics['num_examples'] == len(CLIENT_DATA[1][1])
  assert np.isfinite(metrics['train_loss'])


def test_round_with_only_empty_clients_changes_nothing(build_process):
  process = build_process()
  params = _np_initial_params()
  server_control = _nonzero_controls(1)
  client_controls = [_nonzero_controls(2), _nonzero_controls(3)]

  state, new_client_states, metrics = process.next(
      _server_state(params, server_control, round_num=3),
      [_dataset(EMPTY_DATA), _dataset(EMPTY_DATA)],
      [_client_state(c) for c in client_controls],
  )

  _assert_close(state.global_model_weights.trainable, params)
  _assert_close(state.control_variate, server_control)
  for new_state, control in zip(new_client_states, client_controls):
    _assert_close(new_state.control_variate, control)
  assert state.round_num == 4
  assert metrics['num_clients_with_data'] == 0
  assert metrics['num_examples'] == 0
  assert metrics['train_loss'] == 0.0


@pytest.mark.parametrize(
    'data, expected_count',
    [
        # Counter starts at 10; the clients count 6 and 5 examples; the empty
        # client is ignored: 10 + (6 + 5) / 2.
        ((CLIENT_DATA[0], CLIENT_DATA[1], EMPTY_DATA), 15.5),
        ((EMPTY_DATA, EMPTY_DATA), 10.0),
    ],
)
def test_non_trainable_weights_are_averaged_over_clients_with_data(
    build_process, data, expected_count
):
  process = build_process(with_counter=True)
  params = _np_initial_params()
  client_control = _np_zeros()

  state, _, _ = process.next(
      _server_state(params, _np_zeros(), non_trainable=[10.0]),
      [_dataset(d) for d in data],
      [_client_state(client_control) for _ in data],
  )

  _assert_close(state.global_model_weights.non_trainable, [expected_count])


# WSM clients in the process.


def test_rounds_with_wsm_match_numpy_scaffold(build_process):
  process = build_process(client_loss='wsm', num_classes=NUM_CLASSES)
  rounds = len(SAMPLING_SCHEDULE)
  expected = _np_simulate(rounds, client_loss='wsm')

  for t, state, store, _ in _run_rounds(process, rounds):
    _assert_round_matches(t, state, store, expected[t - 1], with_window=False)


def test_rounds_with_wsm_report_plain_cross_entropy(build_process):
  process = build_process(client_loss='wsm', num_classes=NUM_CLASSES)
  rounds = 2
  expected = _np_simulate(rounds, client_loss='wsm')

  for t, _, _, metrics in _run_rounds(process, rounds):
    np.testing.assert_allclose(
        metrics['train_loss'], expected[t - 1].train_loss, rtol=1e-5,
        err_msg=f'round {t}',
    )
    assert metrics['num_examples'] == expected[t - 1].num_examples


# The window.

# (W, start_round): active from max(W, start_round), i.e. from round W, or
# from round W + 1 (start_round after W).
WINDOW_CASES = [
    (window_size, start_round, mode)
    for window_size, start_round in ((2, 0), (2, 3), (3, 0), (3, 4))
    for mode in ('evaluate', 'broadcast')
]


@pytest.mark.parametrize('window_size, start_round, mode', WINDOW_CASES)
def test_window_rounds_match_numpy(
    build_process, window_size, start_round, mode
):
  process = build_process(
      window_size=window_size, window_mode=mode,
      window_start_round=start_round,
  )
  rounds = 2 * window_size + 2
  expected = _np_simulate(
      rounds, window_size=window_size, mode=mode, start_round=start_round
  )

  for t, state, store, _ in _run_rounds(process, rounds):
    _assert_round_matches(t, state, store, expected[t - 1], with_window=True)


@pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
def test_window_measurements_match_numpy(build_process, mode):
  window_size, start_round = 2, 3
  process = build_process(
      window_size=window_size, window_mode=mode,
      window_start_round=start_round,
  )
  rounds = 5
  expected = _np_simulate(
      rounds, window_size=window_size, mode=mode, start_round=start_round
  )

  for t, _, _, metrics in _run_rounds(process, rounds):
    measured = metrics['window']
    assert measured['window_fill'] == expected[t - 1].window_fill, t
    assert bool(measured['window_active']) == expected[t - 1].window_active, t
    np.testing.assert_allclose(
        measured['window_distance'], expected[t - 1].window_distance,
        atol=ATOL, err_msg=f'round {t}',
    )
    np.testing.assert_allclose(
        metrics['train_loss'], expected[t - 1].train_loss, rtol=1e-5,
        err_msg=f'round {t}',
    )


def test_initial_window_is_empty_and_model_is_initial(build_process):
  state = build_process(window_size=2, window_mode='evaluate').initialize()

  assert isinstance(state.window, window_lib.WindowBuffer)
  assert state.window.num_models == 0
  assert state.window.window_size == 2
  _assert_close(scaffold.get_model_weights(state).trainable,
                _np_initial_params())
  _assert_close(window_model_weights(state).trainable, _np_initial_params())


def test_window_metrics_type(build_process):
  process = build_process(window_size=2, window_mode='broadcast')

  tff.test.assert_types_identical(
      process.next.type_signature.result[2],
      tff.FederatedType(
          tff.to_type(
              collections.OrderedDict(
                  train_loss=np.float32,
                  num_examples=np.int64,
                  num_clients_with_data=np.int32,
                  window=collections.OrderedDict(
                      window_fill=np.int32,
                      window_active=np.bool_,
                      window_distance=np.float32,
                  ),
              )
          ),
          tff.SERVER,
      ),
  )


def test_wsm_with_broadcast_window_matches_numpy(build_process):
  window_size, start_round = 2, 3
  process = build_process(
      client_loss='wsm', num_classes=NUM_CLASSES, window_size=window_size,
      window_mode='broadcast', window_start_round=start_round,
  )
  rounds = 2 * window_size + 2
  expected = _np_simulate(
      rounds, client_loss='wsm', window_size=window_size, mode='broadcast',
      start_round=start_round,
  )

  for t, state, store, metrics in _run_rounds(process, rounds):
    _assert_round_matches(t, state, store, expected[t - 1], with_window=True)
    np.testing.assert_allclose(
        metrics['train_loss'], expected[t - 1].train_loss, rtol=1e-5,
        err_msg=f'round {t}',
    )


# Arguments.


@pytest.mark.parametrize(
    'kwargs, error, argument',
    [
        (dict(client_loss='mse'), ValueError, 'client_loss'),
        (dict(client_loss=None), ValueError, 'client_loss'),
        (dict(client_loss='wsm'), ValueError, 'num_classes'),
        (dict(client_loss='wsm', num_classes=0), ValueError, 'num_classes'),
        (dict(client_loss='wsm', num_classes=2.0), ValueError, 'num_classes'),
        (dict(window_size=0), ValueError, 'window_size'),
        (dict(window_size=2.5), TypeError, 'window_size'),
        (dict(window_size=2, window_mode='ima'), ValueError, 'window_mode'),
        (dict(window_size=2, window_start_round=-1), ValueError,
         'window_start_round'),
        (dict(window_size=2, window_start_round=1.0), TypeError,
         'window_start_round'),
    ],
)
def test_build_rejects_bad_loss_and_window_arguments(kwargs, error, argument):
  with pytest.raises(error, match=argument):
    scaffold.build_scaffold(
        _model_fn, client_learning_rate=0.1, total_clients=4, **kwargs
    )


@pytest.mark.parametrize('client_loss', ['mse', 'WSM'])
def test_client_update_rejects_unknown_client_loss(client_loss):
  with pytest.raises(ValueError, match=r"client_loss.*\('ce', 'wsm'\)"):
    scaffold.build_scaffold_client_update(
        _model_fn, 0.1, client_loss=client_loss
    )


def test_build_with_wsm_rejects_non_integer_labels():
  float_labels = collections.OrderedDict(
      x=_INPUT_SPEC['x'], y=tf.TensorSpec([None], tf.float32)
  )

  with pytest.raises(ValueError, match='integer'):
    scaffold.build_scaffold(
        lambda: _model_fn(input_spec=float_labels),
        client_learning_rate=0.1,
        total_clients=4,
        client_loss='wsm',
        num_classes=NUM_CLASSES,
    )


@pytest.mark.parametrize(
    'kwargs, argument',
    [
        (dict(client_learning_rate=0.0), 'client_learning_rate'),
        (dict(client_learning_rate=-0.1), 'client_learning_rate'),
        (dict(server_learning_rate=0.0), 'server_learning_rate'),
        (dict(total_clients=0), 'total_clients'),
        (dict(total_clients=2.5), 'total_clients'),
    ],
)
def test_build_rejects_bad_arguments(kwargs, argument):
  arguments = dict(
      client_learning_rate=0.1, server_learning_rate=1.0, total_clients=4
  )
  arguments.update(kwargs)

  with pytest.raises(ValueError, match=argument):
    scaffold.build_scaffold(_model_fn, **arguments)


def test_get_model_weights_rejects_other_values():
  with pytest.raises(ValueError, match='`state`'):
    scaffold.get_model_weights(({}, [], 0))
