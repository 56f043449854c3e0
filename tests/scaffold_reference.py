"""Data, model and an independent numpy SCAFFOLD for the client-state tests.

Every expected number comes from `np_client_update` / `np_server_update`, a
float64 numpy SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II;
docs/design.md sec. 3) for a linear softmax model; with WSM clients its
gradient is the re-weighted softmax gradient derived in `np_wsm_gradients`
(docs/design.md sec. 2), and `np_simulate` adds the window (docs/design.md
sec. 1) with `tests.numpy_reference.window_mean_eq4`.
"""

import collections
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import numpy_reference as ref
from tff_fedwin import training
from tff_fedwin.aggregators import window_model_weights
from tff_fedwin.algorithms import runners
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


def make_client_data(num_examples: int, batch_size: int):
  x = _RNG.normal(size=(num_examples, NUM_FEATURES)).astype(np.float32)
  y = _RNG.integers(0, NUM_CLASSES, size=(num_examples,)).astype(np.int32)
  return x, y, batch_size


# (x, y, batch_size): 2 full batches; 3 batches with a partial last one;
# 1 batch; 3 batches with a partial last one.
CLIENT_DATA = (
    make_client_data(6, 3),
    make_client_data(5, 2),
    make_client_data(4, 4),
    make_client_data(7, 3),
)
EMPTY_DATA = (
    np.zeros((0, NUM_FEATURES), np.float32),
    np.zeros((0,), np.int32),
    2,
)

INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, NUM_FEATURES], tf.float32),
    y=tf.TensorSpec([None], tf.int32),
)


class ExampleCounter(tf.keras.layers.Layer):
  """Identity layer with a non-trainable weight counting training examples."""

  def build(self, input_shape):
    self.count = self.add_weight(
        name='count', shape=(), initializer='zeros', trainable=False
    )

  def call(self, inputs, training=None):
    if training:
      self.count.assign_add(tf.cast(tf.shape(inputs)[0], tf.float32))
    return inputs


def model_fn(with_counter: bool = False, input_spec=None):
  layers = [tf.keras.layers.InputLayer(input_shape=(NUM_FEATURES,))]
  if with_counter:
    layers.append(ExampleCounter())
  layers.append(
      tf.keras.layers.Dense(
          NUM_CLASSES,
          kernel_initializer=tf.keras.initializers.Constant(INITIAL_KERNEL),
          bias_initializer=tf.keras.initializers.Constant(INITIAL_BIAS),
      )
  )
  return tff.learning.models.from_keras_model(
      tf.keras.Sequential(layers),
      input_spec=INPUT_SPEC if input_spec is None else input_spec,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
  )


def make_dataset(data) -> tf.data.Dataset:
  x, y, batch_size = data
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)
  ).batch(batch_size)


# ----------------------------------------------------------------------------
# Independent numpy SCAFFOLD for logits = x @ W + b, mean softmax cross-entropy.
# Parameters are lists [W, b] of float64 arrays.


class NpClientResult(NamedTuple):
  model_delta: Any
  control_delta: Any
  new_control: Any
  weight: float
  num_examples: int
  loss_sum: float


def np_loss_and_gradients(params, x, y):
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


def np_class_proportions(y):
  """WSM's beta_c = n_c / n over a client's whole dataset."""
  return np.bincount(y, minlength=NUM_CLASSES) / len(y)


def np_wsm_gradients(params, x, y, beta):
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


def np_batches(data):
  x, y, batch_size = data
  return [
      (x[i : i + batch_size], y[i : i + batch_size])
      for i in range(0, len(y), batch_size)
  ]


def np_client_update(
    server_params,
    server_control,
    client_control,
    data,
    client_loss='ce',
    lr=CLIENT_LEARNING_RATE,
):
  """SCAFFOLD client: local corrected SGD, then option-II control update,
  both with the round's client rate `lr`.

  With client_loss='wsm' the step uses the WSM gradient with the client's
  class proportions; the reported loss stays the plain cross-entropy.
  """
  y_params = [p.copy() for p in server_params]
  num_steps, num_examples, loss_sum = 0, 0, 0.0
  if client_loss == 'wsm' and len(data[1]):
    beta = np_class_proportions(data[1])
  for x_batch, y_batch in np_batches(data):
    loss, grads = np_loss_and_gradients(y_params, x_batch, y_batch)
    if client_loss == 'wsm':
      grads = np_wsm_gradients(y_params, x_batch, y_batch, beta)
    loss_sum += loss * len(y_batch)
    num_examples += len(y_batch)
    y_params = [
        p - lr * (g - ci + c)
        for p, g, ci, c in zip(y_params, grads, client_control, server_control)
    ]
    num_steps += 1
  if num_steps == 0:
    zeros = [np.zeros_like(p) for p in server_params]
    return NpClientResult(zeros, zeros, list(client_control), 0.0, 0, 0.0)
  new_control = [
      ci - c + (x - y) / (num_steps * lr)
      for ci, c, x, y in zip(
          client_control, server_control, server_params, y_params
      )
  ]
  return NpClientResult(
      model_delta=[y - x for y, x in zip(y_params, server_params)],
      control_delta=[n - o for n, o in zip(new_control, client_control)],
      new_control=new_control,
      weight=1.0,
      num_examples=num_examples,
      loss_sum=loss_sum,
  )


def np_server_update(server_params, server_control, results, server_lr):
  """SCAFFOLD server: x += lr_g * mean(dy) over clients with data;

  c += sum(dc) / N.
  """
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


def np_zeros():
  return [
      np.zeros((NUM_FEATURES, NUM_CLASSES)),
      np.zeros((NUM_CLASSES,)),
  ]


def np_initial_params():
  return [INITIAL_KERNEL.astype(np.float64), INITIAL_BIAS.astype(np.float64)]


def sampled_clients(round_num):
  """The client indices sampled in round t = 1, 2, ... (schedule repeats)."""
  return SAMPLING_SCHEDULE[(round_num - 1) % len(SAMPLING_SCHEDULE)]


class NpRound(NamedTuple):
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


def np_simulate(
    rounds,
    *,
    client_loss='ce',
    window_size=None,
    mode='evaluate',
    start_round=0,
    server_learning_rate=1.0,
    lr_of_round=lambda t: CLIENT_LEARNING_RATE,
):
  """SCAFFOLD (+ WSM clients) (+ window) for `rounds` rounds, in float64;
  round t's clients step with `lr_of_round(t)`.

  The window holds the post-server-step models w^t (`aggregated[t]`); it is
  active at t >= max(W, start_round), where the window model is WiMA Eq. 4;
  in 'broadcast' mode (IMA) the next round starts from it, in 'evaluate' mode
  from w^t. The window never touches c or the c_i.
  """
  x = np_initial_params()
  control = np_zeros()
  client_controls = [np_zeros() for _ in range(TOTAL_CLIENTS)]
  aggregated = [x]
  history = []
  for t in range(1, rounds + 1):
    sampled = sampled_clients(t)
    results = [
        np_client_update(
            x,
            control,
            client_controls[i],
            CLIENT_DATA[i],
            client_loss,
            lr_of_round(t),
        )
        for i in sampled
    ]
    w_t, control = np_server_update(x, control, results, server_learning_rate)
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
        NpRound(
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


def assert_close(actual, expected):
  actual = list(actual)
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(a, e, rtol=0, atol=ATOL)


def make_server_state(params, control, non_trainable=(), round_num=0):
  """A `ScaffoldServerState` of numpy values, to start `next` anywhere."""
  return scaffold.ScaffoldServerState(
      global_model_weights=tff.learning.models.ModelWeights(
          trainable=[np.asarray(p, np.float32) for p in params],
          non_trainable=[np.asarray(v, np.float32) for v in non_trainable],
      ),
      control_variate=[np.asarray(c, np.float32) for c in control],
      round_num=np.int64(round_num),
  )


def make_client_state(control):
  return scaffold.ScaffoldClientState(
      control_variate=[np.asarray(c, np.float32) for c in control]
  )


def nonzero_controls(seed):
  rng = np.random.default_rng(seed)
  return [
      0.2 * rng.normal(size=(NUM_FEATURES, NUM_CLASSES)),
      0.2 * rng.normal(size=(NUM_CLASSES,)),
  ]


def run_rounds(process, rounds, state_files_dir=None, initial_state=None):
  """Runs `process` on the schedule; yields (t, state, store, metrics).

  Through `runners.ClientStateRunner`: with `state_files_dir` (a `'files'`
  process) it writes and reads the state files, else it calls `next`. The
  clients start from `initial_state` (default: a zero `ClientState`).
  """
  if initial_state is None:
    initial_state = scaffold.initial_client_state(model_fn)
  store = training.ClientStateStore(initial_state)
  runner = runners.ClientStateRunner(
      process, initial_state, state_files_dir=state_files_dir
  )
  state = runner.initialize()
  for t in range(1, rounds + 1):
    sampled_ids = [CLIENT_IDS[i] for i in sampled_clients(t)]
    state, new_client_states, metrics = runner.run_round(
        state,
        [make_dataset(CLIENT_DATA[i]) for i in sampled_clients(t)],
        store.get(sampled_ids),
    )
    store.update(sampled_ids, new_client_states)
    yield t, state, store, metrics


def run_learning_rounds(process, rounds):
  """Runs a `LearningProcess` (an algorithm without client states) on the
  schedule; yields (t, state)."""
  state = process.initialize()
  for t in range(1, rounds + 1):
    state = process.next(
        state, [make_dataset(CLIENT_DATA[i]) for i in sampled_clients(t)]
    ).state
    yield t, state


def np_windowed(aggregated, t, window_size, mode):
  """(model sent in round t + 1, window model) after round t, from the
  post-server-step models `aggregated` = [w^0, ..., w^t] (WiMA Eq. 4,
  active from t >= W; IMA sends it)."""
  w_t = aggregated[-1]
  if window_size is None or t < window_size:
    return w_t, w_t
  window = [
      ref.window_mean_eq4([m[j] for m in aggregated], t, window_size)
      for j in range(len(w_t))
  ]
  return (window if mode == 'broadcast' else w_t), window


def assert_round_matches(t, state, store, expected, with_window, process=None):
  """x, c, every client's c_i and the window model equal numpy after round t.

  The window model is read with `model_weights_to_evaluate` and, given the
  `process`, with its `get_model_weights` computation.
  """
  try:
    assert_close(state.global_model_weights.trainable, expected.global_params)
    assert_close(state.control_variate, expected.control)
    for i, cid in enumerate(CLIENT_IDS):
      (client_state,) = store.get([cid])
      assert_close(client_state.control_variate, expected.client_controls[i])
    assert_close(
        scaffold.model_weights_to_evaluate(state).trainable,
        expected.window_params,
    )
    if process is not None:
      assert_close(
          process.get_model_weights(state).trainable, expected.window_params
      )
    if with_window:
      assert_close(
          window_model_weights(state).trainable, expected.window_params
      )
  except AssertionError as e:
    raise AssertionError(f'round {t}: {e}') from e


def process_builder():
  """`build(server_learning_rate=1.0, with_counter=False, **kwargs)`.

  Builds `scaffold.build_scaffold` on `model_fn`, each configuration once
  (for a module-scoped fixture).
  """
  cache = {}

  def build(server_learning_rate=1.0, with_counter=False, **kwargs):
    key = (server_learning_rate, with_counter, tuple(sorted(kwargs.items())))
    if key not in cache:
      cache[key] = scaffold.build_scaffold(
          lambda: model_fn(with_counter),
          client_learning_rate=CLIENT_LEARNING_RATE,
          server_learning_rate=server_learning_rate,
          total_clients=TOTAL_CLIENTS,
          **kwargs,
      )
    return cache[key]

  return build
