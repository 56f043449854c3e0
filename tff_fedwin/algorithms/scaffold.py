"""SCAFFOLD as a TFF iterative process with persistent client control variates.

Implements SCAFFOLD (Karimireddy et al. 2020, "SCAFFOLD: Stochastic Controlled
Averaging for Federated Learning", ICML 2020, Algorithm 1 with option II for the
control-variate update), as specified in DESIGN.md sec. 2.3. With x the server
model, c the server control variate and c_i the control variate of client i,
all on the *trainable* weights only:

* client i: y <- x; for every batch of its dataset
  `y <- y - lr_l * (g(y) - c_i + c)`, g the gradient of the model's loss on the
  batch. With K the number of batches processed (a partial last batch counts),
  `c_i+ = c_i - c + (x - y) / (K * lr_l)`; it sends `dy = y - x` and
  `dc = c_i+ - c_i` and keeps `c_i+`. A client with an empty dataset (K = 0)
  sends `dy = dc = 0` with weight 0 and keeps its `c_i`.
* server: `x <- x + lr_g * mean(dy)` over the sampled clients with data (weight
  1 each; x is unchanged when none has data) and `c <- c + sum_i(dc_i) / N`
  with N = `total_clients`, i.e. `c <- c + (|S| / N) * mean(dc)`. Starting from
  `c = c_i = 0` this keeps c equal to the mean of all N client control variates.
  Non-trainable weights are set to the average of the clients' final values,
  with the same weights as dy (unchanged when no sampled client has data).

Client loss (`client_loss`, DESIGN.md sec. 2.2). With `'ce'` g is the gradient
of the model's own loss (`forward_pass(batch).loss`). With `'wsm'` each client
first computes its class proportions `beta_c = n_c / n` over its whole dataset
(one pass, `tff_fedwin.losses.class_proportions_from_dataset`, inside the client
computation, every round) and g is the gradient of the batch mean of
`tff_fedwin.losses.wsm_cross_entropy(labels, predictions, beta)` (Legate et al.,
re-weighted softmax); the model's predictions must be logits and the labels are
the batch's `'y'` entry (or element 1 of `(x, y)` batches). The reported
`train_loss` is always the model's own loss on the batch (plain cross-entropy on
the raw logits for a `from_keras_model` model with
`SparseCategoricalCrossentropy(from_logits=True)`), never the WSM loss.

Window (`window_size`, DESIGN.md sec. 2.1, WiMA / IMA). The server state's
`window` field is a `tff_fedwin.aggregators.WindowBuffer` of the trainable
weights. After the SCAFFOLD server step, the new x = w^t is pushed into the
window. At active rounds t >= max(W, window_start_round) the window model is
m^t = mean(w^{t-W+1} .. w^t). In `'evaluate'` mode (WiMA) x stays w^t, so the
training trajectory is exactly plain SCAFFOLD; in `'broadcast'` mode (IMA) x
becomes m^t at active rounds, so the clients start the next round from m^t (the
window keeps w^t, never m^t). The server control variate c is never changed by
the window, and non-trainable weights are not windowed. `get_model_weights`
returns the window model (the global model when there is no window or it is
not active).

TFF's `tff.learning.templates.LearningProcess` cannot return CLIENTS-placed
values, so `build_scaffold` returns a `tff.templates.IterativeProcess` whose
`next` takes the client states of the sampled clients and returns their updated
states; the training loop keeps all clients' states in a
`tff_fedwin.training.ClientStateStore` keyed by client id.

Structure, so that each piece can be tested and extended on its own:

* `build_scaffold_client_update` returns the client step as a plain
  `tf.function`; `scaffold_server_update` is the server step as a plain
  `tf.function` on plain structures (`ModelWeights` and tensor lists).
* The federated `next` only broadcasts, maps and sums.
* The server state is the immutable `ScaffoldServerState`. The one place where
  a new state is made is the server computation in `build_scaffold`, which
  calls `scaffold_server_update` and then `state._replace(...)`: a new field
  added to `ScaffoldServerState` is carried through unchanged by `_replace`, and
  an extra transformation of the new global model goes right after the
  `scaffold_server_update` call there (the window step, `window_lib.window_step`, sits
  there).

Usage:

  process = scaffold.build_scaffold(
      model_fn, client_learning_rate=0.1, total_clients=len(client_ids),
      client_loss='wsm', num_classes=10,           # optional: WSM clients
      window_size=5, window_mode='broadcast',      # optional: IMA window
      window_start_round=75)
  store = training.ClientStateStore(scaffold.initial_client_state(model_fn))
  state = process.initialize()
  for round_num in range(num_rounds):
    sampled_ids = ...
    state, new_client_states, metrics = process.next(
        state, [datasets[i] for i in sampled_ids], store.get(sampled_ids))
    store.update(sampled_ids, new_client_states)
  weights = scaffold.get_model_weights(state)
"""

import collections
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window as window_lib
from tff_fedwin.losses import wsm as wsm_lib

ModelFn = Callable[[], tff.learning.models.VariableModel]

CLIENT_LOSSES = ('ce', 'wsm')
# Where WSM reads the labels of a batch (as in `class_proportions_from_dataset`).
LABEL_KEY = 'y'


class ScaffoldServerState(NamedTuple):
  """The SCAFFOLD server state (immutable).

  Attributes:
    global_model_weights: The global model x, a
      `tff.learning.models.ModelWeights` (trainable and non-trainable).
    control_variate: The server control variate c, same structure as
      `global_model_weights.trainable`.
    round_num: Number of completed rounds, an int64 scalar.
    window: With a window (`window_size` set), a
      `tff_fedwin.aggregators.WindowBuffer` of the post-server-step trainable
      weights w^t; `()` (an empty structure) without a window.
  """

  global_model_weights: Any
  control_variate: Any
  round_num: Any
  window: Any = ()


class ScaffoldClientState(NamedTuple):
  """The persistent state of one SCAFFOLD client (immutable).

  Attributes:
    control_variate: The client control variate c_i, same structure as the
      model's trainable weights.
  """

  control_variate: Any


class ScaffoldClientResult(NamedTuple):
  """What one client's local SCAFFOLD step reports.

  Attributes:
    model_delta: dy = y - x on the trainable weights (zeros for an empty
      dataset).
    control_variate_delta: dc = c_i+ - c_i (zeros for an empty dataset).
    non_trainable_weights: The client model's final non-trainable weights.
    client_weight: float32, 1 if the client processed at least one batch, else
      0.
    num_examples: int64, number of examples processed.
    loss_sum: float32, sum over batches of (batch mean loss * batch size).
  """

  model_delta: Any
  control_variate_delta: Any
  non_trainable_weights: Any
  client_weight: Any
  num_examples: Any
  loss_sum: Any


class _RoundSums(NamedTuple):
  """The per-client values summed over the sampled clients in one round."""

  weighted_model_delta: Any
  weighted_non_trainable_weights: Any
  control_variate_delta: Any
  client_weight: Any
  num_examples: Any
  loss_sum: Any
  num_clients_with_data: Any


def _check_positive(name: str, value: float) -> None:
  if not isinstance(value, (int, float)) or isinstance(value, bool):
    raise ValueError(f'`{name}` must be a number, got {value!r}.')
  if not value > 0:
    raise ValueError(f'`{name}` must be positive, got {value!r}.')


def _check_client_loss(client_loss: Any, num_classes: Any) -> None:
  """Raises ValueError naming `client_loss` or `num_classes` if bad."""
  if not isinstance(client_loss, str) or client_loss not in CLIENT_LOSSES:
    raise ValueError(
        f'`client_loss` must be one of {CLIENT_LOSSES}, got {client_loss!r}.'
    )
  if client_loss != 'wsm':
    return
  if num_classes is None:
    raise ValueError(
        "`num_classes` is required with client_loss='wsm' (the length of the "
        'class proportions beta).'
    )
  if (
      isinstance(num_classes, bool)
      or not isinstance(num_classes, (int, np.integer))
      or num_classes < 1
  ):
    raise ValueError(
        f'`num_classes` must be a positive int, got {num_classes!r}.'
    )


def _check_label_spec(input_spec: Any) -> None:
  """Raises ValueError unless WSM can find integer labels in `input_spec`."""
  if isinstance(input_spec, collections.abc.Mapping):
    if LABEL_KEY not in input_spec:
      raise ValueError(
          "client_loss='wsm' reads the labels from the batch key "
          f'{LABEL_KEY!r}, but the model\'s input_spec has keys '
          f'{sorted(input_spec)}.'
      )
    label_spec = input_spec[LABEL_KEY]
  elif isinstance(input_spec, (tuple, list)) and len(input_spec) >= 2:
    label_spec = input_spec[1]
  else:
    raise ValueError(
        "client_loss='wsm' needs batches that are mappings with the labels "
        f'under {LABEL_KEY!r} or (x, y) tuples; the model\'s input_spec is '
        f'{input_spec}.'
    )
  if not (
      isinstance(label_spec, tf.TensorSpec) and label_spec.dtype.is_integer
  ):
    raise ValueError(
        "client_loss='wsm' needs integer class labels; the model's label "
        f'spec is {label_spec}.'
    )


def _batch_labels(batch: Any) -> Any:
  """The labels of a batch: `batch['y']`, or `batch[1]` for `(x, y)` tuples."""
  if isinstance(batch, collections.abc.Mapping):
    return batch[LABEL_KEY]
  return batch[1]


def _check_window_args(
    window_size: Any, window_mode: Any, window_start_round: Any
) -> None:
  """Raises TypeError/ValueError naming the bad `build_scaffold` argument."""
  if not isinstance(window_mode, str) or window_mode not in window_lib.MODES:
    raise ValueError(
        f'`window_mode` must be one of {window_lib.MODES}, got '
        f'{window_mode!r}.'
    )
  for name, value, minimum in (
      ('window_size', window_size, 1),
      ('window_start_round', window_start_round, 0),
  ):
    if name == 'window_size' and value is None:
      continue
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
      raise TypeError(
          f'`{name}` must be an int >= {minimum}'
          + (' or None' if name == 'window_size' else '')
          + f', got {value!r} of type {type(value).__name__}.'
      )
    if value < minimum:
      raise ValueError(f'`{name}` must be an int >= {minimum}, got {value}.')
  if window_size is not None:
    window_lib.validate_window_args(
        int(window_size), window_mode, int(window_start_round), 1
    )


def _model_weights_specs(model_fn: ModelFn) -> tff.learning.models.ModelWeights:
  """The `tf.TensorSpec`s of the model's weights, built in a throwaway graph."""
  with tf.Graph().as_default():
    model = model_fn()
    if not isinstance(model, tff.learning.models.VariableModel):
      raise ValueError(
          '`model_fn` must return a `tff.learning.models.VariableModel`, got '
          f'{type(model).__name__}.'
      )
    weights = tff.learning.models.ModelWeights.from_model(model)
    return tf.nest.map_structure(
        lambda v: tf.TensorSpec(v.shape, v.dtype), weights
    )


def initial_client_state(model_fn: ModelFn) -> ScaffoldClientState:
  """The initial state of every client: c_i = 0, as numpy arrays.

  Args:
    model_fn: A no-arg callable returning a `tff.learning.models.VariableModel`.

  Returns:
    A `ScaffoldClientState` whose `control_variate` holds numpy zeros with the
    structure, shapes and dtypes of the model's trainable weights. Use it as the
    template of a `tff_fedwin.training.ClientStateStore`.
  """
  specs = _model_weights_specs(model_fn)
  return ScaffoldClientState(
      control_variate=tf.nest.map_structure(
          lambda s: np.zeros(s.shape, s.dtype.as_numpy_dtype), specs.trainable
      )
  )


def get_model_weights(
    state: ScaffoldServerState,
) -> tff.learning.models.ModelWeights:
  """The model to evaluate and export: the window model, else the global x.

  A plain Python function (no TFF round trip) on the state returned by
  `process.initialize()` or `process.next(...)[0]`.

  Args:
    state: A `ScaffoldServerState`.

  Returns:
    A `tff.learning.models.ModelWeights` of numpy arrays (use
    `assign_weights_to(keras_model)` to evaluate it): without a window, or
    while the window is not active, `state.global_model_weights`; in
    `'evaluate'` mode at active rounds the window model m^t (trainable) with
    the global model's non-trainable weights; in `'broadcast'` mode the global
    model, which already is m^t at active rounds. Same as
    `tff_fedwin.aggregators.window_model_weights(state)` when there is a window.
  """
  if not isinstance(state, ScaffoldServerState):
    raise ValueError(
        '`state` must be a ScaffoldServerState, got '
        f'{type(state).__name__}.'
    )
  if state.window is None or (
      isinstance(state.window, (tuple, list)) and not state.window
  ):
    return state.global_model_weights
  return window_lib.window_model_weights(state)


def build_scaffold_client_update(
    model_fn: ModelFn,
    client_learning_rate: float,
    *,
    client_loss: str = 'ce',
    num_classes: int | None = None,
) -> Callable[..., tuple[ScaffoldClientState, ScaffoldClientResult]]:
  """Builds the SCAFFOLD client step as a `tf.function`.

  Creates the model (call this inside the graph that will run the step, e.g. a
  `tff.tensorflow.computation`, or eagerly in tests).

  The returned function `client_update(initial_weights, server_control_variate,
  client_state, dataset)` runs Algorithm 1 of Karimireddy et al. (2020), lines
  9-13 with option II, on one client: starting from y = x = `initial_weights`,
  one step `y <- y - lr_l * (g(y) - c_i + c)` per batch of `dataset`, then
  `c_i+ = c_i - c + (x - y) / (K * lr_l)` with K the number of batches. It
  returns `(ScaffoldClientState(c_i+), ScaffoldClientResult)`. For an empty
  dataset, `c_i+ = c_i`, dy = dc = 0 and the client weight is 0.

  g(y) is the gradient of the batch loss: the model's loss for `'ce'`; for
  `'wsm'` the batch mean of `wsm_cross_entropy(labels, predictions, beta)`,
  with beta the client's class proportions, computed in one pass over
  `dataset` before the first step, the labels `batch['y']` (or `batch[1]`)
  and the predictions the model's logits. `loss_sum` always uses the model's
  own loss (plain cross-entropy for a logits model with a sparse categorical
  cross-entropy loss), not the WSM loss.

  Args:
    model_fn: A no-arg callable returning a `tff.learning.models.VariableModel`.
    client_learning_rate: The client learning rate lr_l.
    client_loss: `'ce'` (the model's loss) or `'wsm'` (re-weighted softmax,
      DESIGN.md sec. 2.2).
    num_classes: The number of classes C; required for `'wsm'`, ignored for
      `'ce'`.

  Returns:
    The client step, a `tf.function`.

  Raises:
    ValueError: If `client_loss` is not one of `CLIENT_LOSSES`, or `'wsm'` is
      asked without a positive `num_classes`.
  """
  _check_client_loss(client_loss, num_classes)
  use_wsm = client_loss == 'wsm'
  model = model_fn()
  model_weights = tff.learning.models.ModelWeights.from_model(model)

  @tf.function
  def client_update(initial_weights, server_control_variate, client_state,
                    dataset):
    tf.nest.map_structure(
        lambda v, t: v.assign(t), model_weights, initial_weights
    )
    trainable = model_weights.trainable
    client_control_variate = client_state.control_variate
    # The SCAFFOLD correction added to every gradient: c - c_i.
    correction = tf.nest.map_structure(
        tf.subtract, server_control_variate, client_control_variate
    )
    if use_wsm:
      # WSM: beta_c = n_c / n over the whole local dataset, before training.
      class_proportions = wsm_lib.class_proportions_from_dataset(
          dataset, num_classes, label_key=LABEL_KEY
      )

    def reduce_fn(totals, batch):
      num_steps, num_examples, loss_sum = totals
      with tf.GradientTape() as tape:
        output = model.forward_pass(batch, training=True)
        if use_wsm:
          training_loss = tf.reduce_mean(
              wsm_lib.wsm_cross_entropy(
                  _batch_labels(batch), output.predictions, class_proportions
              )
          )
        else:
          training_loss = output.loss
      gradients = tape.gradient(training_loss, trainable)
      for variable, gradient, corr in zip(
          tf.nest.flatten(trainable),
          tf.nest.flatten(gradients),
          tf.nest.flatten(correction),
      ):
        if gradient is None:
          gradient = tf.zeros_like(variable)
        variable.assign_sub(
            tf.cast(client_learning_rate, variable.dtype) * (gradient + corr)
        )
      if output.num_examples is None:
        batch_size = tf.shape(output.predictions, out_type=tf.int64)[0]
      else:
        batch_size = tf.cast(output.num_examples, tf.int64)
      loss_sum += tf.cast(output.loss, tf.float32) * tf.cast(
          batch_size, tf.float32
      )
      return num_steps + 1, num_examples + batch_size, loss_sum

    num_steps, num_examples, loss_sum = dataset.reduce(
        (
            tf.constant(0, tf.int64),
            tf.constant(0, tf.int64),
            tf.constant(0.0, tf.float32),
        ),
        reduce_fn,
    )
    has_data = num_steps > 0
    final_trainable = tf.nest.map_structure(tf.identity, trainable)
    # With no steps y = x, so dy is exactly zero.
    model_delta = tf.nest.map_structure(
        tf.subtract, final_trainable, initial_weights.trainable
    )

    def new_control_variate(c_i, c, x, y):
      # Option II. divide_no_nan keeps K = 0 finite; tf.where then keeps c_i.
      scale = tf.cast(num_steps, x.dtype) * tf.cast(
          client_learning_rate, x.dtype
      )
      return tf.where(
          has_data, c_i - c + tf.math.divide_no_nan(x - y, scale), c_i
      )

    new_client_control_variate = tf.nest.map_structure(
        new_control_variate,
        client_control_variate,
        server_control_variate,
        initial_weights.trainable,
        final_trainable,
    )
    control_variate_delta = tf.nest.map_structure(
        tf.subtract, new_client_control_variate, client_control_variate
    )
    result = ScaffoldClientResult(
        model_delta=model_delta,
        control_variate_delta=control_variate_delta,
        non_trainable_weights=tf.nest.map_structure(
            tf.identity, model_weights.non_trainable
        ),
        client_weight=tf.cast(has_data, tf.float32),
        num_examples=num_examples,
        loss_sum=loss_sum,
    )
    return ScaffoldClientState(new_client_control_variate), result

  return client_update


@tf.function
def _round_sums_summand(result: ScaffoldClientResult) -> _RoundSums:
  """One client's contribution to the round's sums (weights applied)."""

  def weighted(t):
    return tf.cast(result.client_weight, t.dtype) * t

  return _RoundSums(
      weighted_model_delta=tf.nest.map_structure(weighted, result.model_delta),
      weighted_non_trainable_weights=tf.nest.map_structure(
          weighted, result.non_trainable_weights
      ),
      control_variate_delta=result.control_variate_delta,
      client_weight=result.client_weight,
      num_examples=result.num_examples,
      loss_sum=result.loss_sum,
      num_clients_with_data=tf.cast(result.client_weight > 0, tf.int32),
  )


@tf.function
def scaffold_server_update(
    model_weights,
    control_variate,
    weighted_model_delta_sum,
    weighted_non_trainable_sum,
    control_variate_delta_sum,
    client_weight_sum,
    *,
    server_learning_rate: float,
    total_clients: int,
):
  """The SCAFFOLD server step (Karimireddy et al. 2020, Algorithm 1, l. 16-17).

  `x <- x + lr_g * sum_i(w_i dy_i) / sum_i(w_i)`, non-trainable weights
  `<- sum_i(w_i v_i) / sum_i(w_i)`, and `c <- c + sum_i(dc_i) / N`. When
  `client_weight_sum` is 0 (no sampled client had data) x and the
  non-trainable weights are returned unchanged.

  Args:
    model_weights: The global model x, a `tff.learning.models.ModelWeights`.
    control_variate: The server control variate c (trainable structure).
    weighted_model_delta_sum: sum_i w_i dy_i (trainable structure).
    weighted_non_trainable_sum: sum_i w_i v_i of the clients' final
      non-trainable weights (non-trainable structure).
    control_variate_delta_sum: sum_i dc_i (trainable structure).
    client_weight_sum: sum_i w_i, a float32 scalar.
    server_learning_rate: lr_g.
    total_clients: N, the number of clients in the population.

  Returns:
    `(new_model_weights, new_control_variate)`, same structures as the inputs.
  """
  has_data = client_weight_sum > 0

  def new_trainable(x, delta_sum):
    mean_delta = tf.math.divide_no_nan(
        delta_sum, tf.cast(client_weight_sum, x.dtype)
    )
    return x + tf.cast(server_learning_rate, x.dtype) * mean_delta

  def new_non_trainable(v, value_sum):
    mean_value = tf.math.divide_no_nan(
        value_sum, tf.cast(client_weight_sum, v.dtype)
    )
    return tf.where(has_data, mean_value, v)

  def new_control(c, delta_sum):
    return c + delta_sum / tf.cast(total_clients, c.dtype)

  new_model_weights = tff.learning.models.ModelWeights(
      trainable=tf.nest.map_structure(
          new_trainable, model_weights.trainable, weighted_model_delta_sum
      ),
      non_trainable=tf.nest.map_structure(
          new_non_trainable,
          model_weights.non_trainable,
          weighted_non_trainable_sum,
      ),
  )
  new_control_variate = tf.nest.map_structure(
      new_control, control_variate, control_variate_delta_sum
  )
  return new_model_weights, new_control_variate


@tf.function
@tf.function
def _round_metrics(sums: _RoundSums):
  return collections.OrderedDict(
      train_loss=tf.math.divide_no_nan(
          sums.loss_sum, tf.cast(sums.num_examples, tf.float32)
      ),
      num_examples=sums.num_examples,
      num_clients_with_data=sums.num_clients_with_data,
  )


def build_scaffold(
    model_fn: ModelFn,
    *,
    client_learning_rate: float,
    server_learning_rate: float = 1.0,
    total_clients: int,
    client_loss: str = 'ce',
    num_classes: int | None = None,
    window_size: int | None = None,
    window_mode: str = 'evaluate',
    window_start_round: int = 0,
) -> tff.templates.IterativeProcess:
  """Builds SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II) for TFF.

  The returned `tff.templates.IterativeProcess` has

  * `initialize`: `( -> S@SERVER)`, S a `ScaffoldServerState` with x the
    model's initial weights, c = 0 and `round_num` = 0;
  * `next`: `(<S@SERVER, {D*}@CLIENTS, {C}@CLIENTS> ->
    <S@SERVER, {C}@CLIENTS, M@SERVER>)` where `{D*}@CLIENTS` are the sampled
    clients' datasets (elements of the model's `input_spec`), `{C}@CLIENTS`
    their `ScaffoldClientState`s (input and updated output, in the same client
    order) and M an `OrderedDict` with `train_loss` (mean batch loss weighted by
    batch size over all sampled clients; the model's own loss, also with
    `client_loss='wsm'`), `num_examples` (int64) and `num_clients_with_data`
    (int32); with a window also `window`, an `OrderedDict` with
    `window_fill` (int32, min(t, W)), `window_active` (bool) and
    `window_distance` (float32, ||window model - w^t||_2 on the trainable
    weights, w^t the post-server-step model before any broadcast of m^t).

  With `window_size` set, `S.window` is a `WindowBuffer` and, after the server
  step, w^t is pushed into it; in `'broadcast'` mode x becomes the window model
  m^t at active rounds (see the module docstring). `round_num` counts rounds
  (int64) independently of the window's own counter.

  Use `get_model_weights(state)` for the model to evaluate (the window model)
  and `initial_client_state(model_fn)` for the initial client state c_i = 0.

  Args:
    model_fn: A no-arg callable returning a new
      `tff.learning.models.VariableModel` on each call (e.g. from
      `tff.learning.models.from_keras_model`). Weights must be floating point.
    client_learning_rate: The client learning rate lr_l, positive.
    server_learning_rate: The server learning rate lr_g, positive.
    total_clients: N, the number of clients in the population (all clients that
      may ever be sampled), positive.
    client_loss: `'ce'`: clients train on the model's loss. `'wsm'`: clients
      train on the re-weighted softmax cross-entropy with their own class
      proportions (DESIGN.md sec. 2.2); the model's predictions must be logits
      of shape [batch, num_classes] and the batches must carry integer labels
      under `'y'` (or be `(x, y)` tuples).
    num_classes: The number of classes; required for `'wsm'`, ignored for
      `'ce'`.
    window_size: W >= 1 for a window of the last W global models; `None` (the
      default) for plain SCAFFOLD.
    window_mode: `'evaluate'` (WiMA: the window model is only evaluated) or
      `'broadcast'` (IMA: clients start from it).
    window_start_round: The window model is active from round
      max(W, window_start_round) on (IMA's t_s; 0 for WiMA).

  Returns:
    A `tff.templates.IterativeProcess`.

  Raises:
    ValueError: If an argument is not positive, `client_loss` is not one of
      `('ce', 'wsm')`, `'wsm'` lacks `num_classes` or integer labels,
      `window_mode` is not `'evaluate'`/`'broadcast'`, `window_size < 1` or
      `window_start_round < 0`, or `model_fn` does not build a `VariableModel`
      with floating-point weights.
    TypeError: If `window_size` or `window_start_round` is not an int.
  """
  _check_positive('client_learning_rate', client_learning_rate)
  _check_positive('server_learning_rate', server_learning_rate)
  if not isinstance(total_clients, (int, np.integer)) or isinstance(
      total_clients, bool
  ):
    raise ValueError(
        f'`total_clients` must be an integer, got {total_clients!r}.'
    )
  _check_positive('total_clients', int(total_clients))
  _check_client_loss(client_loss, num_classes)
  _check_window_args(window_size, window_mode, window_start_round)
  if not callable(model_fn):
    raise ValueError('`model_fn` must be a no-arg callable.')
  specs = _model_weights_specs(model_fn)
  for spec in tf.nest.flatten(specs):
    if not spec.dtype.is_floating:
      raise ValueError(
          '`model_fn` must build a model with floating-point weights; found '
          f'a weight of dtype {spec.dtype.name}.'
      )
  with tf.Graph().as_default():
    input_spec = model_fn().input_spec
  if client_loss == 'wsm':
    _check_label_spec(input_spec)
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(input_spec))
  total_clients = int(total_clients)
  with_window = window_size is not None

  @tff.tensorflow.computation
  def initial_server_state_fn():
    model = model_fn()
    weights = tff.learning.models.ModelWeights.from_model(model)
    zeros = tf.nest.map_structure(tf.zeros_like, weights.trainable)
    window = ()
    if with_window:
      window = window_lib.initial_window(
          zeros, window_size, window_mode, window_start_round, read_every=1
      )
    return ScaffoldServerState(
        global_model_weights=weights,
        control_variate=zeros,
        round_num=tf.constant(0, tf.int64),
        window=window,
    )

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_eval(initial_server_state_fn, tff.SERVER)

  server_state_type = initial_server_state_fn.type_signature.result
  weights_type = server_state_type.global_model_weights
  control_variate_type = server_state_type.control_variate
  client_state_type = tff.types.to_type(
      ScaffoldClientState(control_variate=control_variate_type)
  )

  @tff.tensorflow.computation(
      weights_type, control_variate_type, client_state_type, data_type
  )
  def client_update_fn(initial_weights, server_control_variate, client_state,
                       dataset):
    client_update = build_scaffold_client_update(
        model_fn,
        client_learning_rate,
        client_loss=client_loss,
        num_classes=num_classes,
    )
    new_client_state, result = client_update(
        initial_weights, server_control_variate, client_state, dataset
    )
    return new_client_state, _round_sums_summand(result)

  round_sums_type = client_update_fn.type_signature.result[1]

  @tff.tensorflow.computation(server_state_type, round_sums_type)
  def server_update_fn(state, sums):
    new_model_weights, new_control_variate = scaffold_server_update(
        state.global_model_weights,
        state.control_variate,
        sums.weighted_model_delta,
        sums.weighted_non_trainable_weights,
        sums.control_variate_delta,
        sums.client_weight,
        server_learning_rate=server_learning_rate,
        total_clients=total_clients,
    )
    # Extension point: transform `new_model_weights` here, and update new
    # `ScaffoldServerState` fields in `_replace` (others are carried over).
    metrics = _round_metrics(sums)
    window = state.window
    if with_window:
      # Push w^t; in 'broadcast' mode at active rounds x becomes m^t. The
      # control variate c is left as the SCAFFOLD step made it.
      window, new_model_weights, metrics['window'] = window_lib.window_step(
          window, new_model_weights
      )
    new_state = state._replace(
        global_model_weights=new_model_weights,
        control_variate=new_control_variate,
        round_num=state.round_num + 1,
        window=window,
    )
    return new_state, metrics

  @tff.federated_computation(
      tff.FederatedType(server_state_type, tff.SERVER),
      tff.FederatedType(data_type, tff.CLIENTS),
      tff.FederatedType(client_state_type, tff.CLIENTS),
  )
  def next_fn(state, client_data, client_states):
    model_weights = tff.federated_broadcast(state.global_model_weights)
    control_variate = tff.federated_broadcast(state.control_variate)
    client_outputs = tff.federated_map(
        client_update_fn,
        (model_weights, control_variate, client_states, client_data),
    )
    new_client_states = client_outputs[0]
    sums = tff.federated_sum(client_outputs[1])
    new_state, metrics = tff.federated_map(server_update_fn, (state, sums))
    return new_state, new_client_states, metrics

  return tff.templates.IterativeProcess(
      initialize_fn, next_fn, next_is_multi_arg=True
  )
