"""`build_client_state_process`: a process whose clients keep a state."""

from collections.abc import Callable

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks as argument_checks
from tff_fedwin.aggregators import window_math
from tff_fedwin.aggregators import window_readout
from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import scheduled_client_work
from tff_fedwin.algorithms import sharpness as sharpness_lib
from tff_fedwin.algorithms.client_state import algorithm as algorithm_lib
from tff_fedwin.algorithms.client_state import checks
from tff_fedwin.algorithms.client_state import next_fns
from tff_fedwin.algorithms.client_state import server
from tff_fedwin.algorithms.client_state import state_files
from tff_fedwin.algorithms.client_state import types

ModelFn = Callable[[], tff.learning.models.VariableModel]
ClientLearningRateFn = scheduled_client_work.ClientLearningRateFn


class ClientStateProcess(tff.templates.IterativeProcess):
  """A `tff.templates.IterativeProcess` with `get_model_weights`.

  TFF's `LearningProcess` cannot return CLIENTS-placed values (the updated
  client states), so the process is an `IterativeProcess` whose `next` is
  multi-argument; like `LearningProcess` it carries `get_model_weights`, a
  `tff.Computation` `(S -> ModelWeights)` on the unplaced server state, and
  `client_state_transfer`, how `next` takes the client states (`'values'`:
  in and out as CLIENTS-placed values; `'files'`: file prefixes in,
  `state_files`).
  """

  def __init__(
      self,
      initialize_fn: tff.Computation,
      next_fn: tff.Computation,
      get_model_weights_fn: tff.Computation,
      client_state_transfer: str = 'values',
  ):
    super().__init__(initialize_fn, next_fn, next_is_multi_arg=True)
    self._client_state_transfer = state_files.check_transfer(
        client_state_transfer
    )
    state_type = initialize_fn.type_signature.result.member
    parameter = get_model_weights_fn.type_signature.parameter
    if parameter is None or not parameter.is_equivalent_to(state_type):
      raise TypeError(
          '`get_model_weights_fn` must take the unplaced server state '
          f'{state_type}, got {parameter}.'
      )
    self._get_model_weights_fn = get_model_weights_fn

  @property
  def client_state_transfer(self) -> str:
    """`'values'` or `'files'`: how `next` takes the client states."""
    return self._client_state_transfer

  @property
  def get_model_weights(self) -> tff.Computation:
    """`(S -> ModelWeights)`: the window model, else the global model x."""
    return self._get_model_weights_fn


def model_weights_to_evaluate(
    state: types.ServerState,
) -> tff.learning.models.ModelWeights:
  """The model to evaluate, in numpy: the window model, else the global x.

  A plain Python function (no TFF call) on a state returned by
  `process.initialize()` or `process.next(...)[0]`; the same value as
  `process.get_model_weights(state)`.

  Args:
    state: A `types.ServerState`.

  Returns:
    A `tff.learning.models.ModelWeights` (`tff_fedwin.aggregators.
    window_or_global_model_weights`): `state.global_model_weights` without a
    window or while it is not active; in `'evaluate'` mode at active rounds
    the window model m^t (trainable) with the global model's non-trainable
    weights.

  Raises:
    ValueError: If `state` is not a `types.ServerState`.
  """
  if not isinstance(state, types.ServerState):
    raise ValueError(
        '`state` must be the ServerState of a client-state process (SCAFFOLD, '
        f'FedDyn), got {type(state).__name__}.'
    )
  return window_readout.window_or_global_model_weights(state)


def _initial_state_computation(
    model_fn, algorithm, *, window_size, window_mode, window_start_round
) -> tff.Computation:
  """`( -> S)`: x the model's initial weights, the algorithm's initial server
  vector (zeros by default), round 0, an empty window."""

  @tff.tensorflow.computation
  def initial_server_state_fn():
    weights = tff.learning.models.ModelWeights.from_model(model_fn())
    zeros = tf.nest.map_structure(tf.zeros_like, weights.trainable)
    window = ()
    if window_size is not None:
      window = window_math.initial_window(
          zeros,
          window_size=window_size,
          mode=window_mode,
          start_round=window_start_round,
          read_every=1,
      )
    return types.ServerState(
        global_model_weights=weights,
        control_variate=algorithm.initial_server_vector(weights.trainable),
        round_num=tf.constant(0, tf.int64),
        window=window,
    )

  return initial_server_state_fn


def _learning_process(
    initialize_fn, next_fn, get_model_weights_fn, server_state_type
) -> tff.learning.templates.LearningProcess:
  """The `LearningProcess` of an algorithm without client states."""

  @tff.tensorflow.computation(
      server_state_type, server_state_type.global_model_weights
  )
  def set_model_weights_fn(state, weights):
    return state._replace(global_model_weights=weights)

  return tff.learning.templates.LearningProcess(
      initialize_fn, next_fn, get_model_weights_fn, set_model_weights_fn
  )


def build_client_state_process(
    model_fn: ModelFn,
    algorithm: algorithm_lib.ClientStateAlgorithm,
    *,
    client_learning_rate: float,
    server_learning_rate: float = 1.0,
    total_clients: int,
    client_loss: str = 'ce',
    num_classes: int | None = None,
    client_weight_decay: float = 0.0,
    client_sharpness: sharpness_lib.Sharpness | None = None,
    window_size: int | None = None,
    window_mode: str = 'evaluate',
    window_start_round: int = 0,
    loop_implementation: client_loop.LoopForm | None = None,
    client_state_transfer: str = 'values',
    client_learning_rate_fn: ClientLearningRateFn | None = None,
) -> ClientStateProcess | tff.learning.templates.LearningProcess:
  """Builds the process of a `ClientStateAlgorithm` (SCAFFOLD, FedDyn) for TFF.

  Type signatures (docs/design.md sec. 3), S a `types.ServerState`, C a
  `types.ClientState`, D the model's `input_spec`:

  * `initialize`: `( -> S@SERVER)`, x the model's initial weights, a zero
    server vector, `round_num` = 0;
  * `next`: `(<S@SERVER, {D*}@CLIENTS, {C}@CLIENTS> ->
    <S@SERVER, {C}@CLIENTS, M@SERVER>)`, the sampled clients' datasets and
    states in, their updated states out (same order); M holds `train_loss`
    (the model's own loss, example-weighted, also with `'wsm'`),
    `num_examples` (int64), `num_clients_with_data` (int32) and, with a
    window, `window` (`window_fill`, `window_active`, `window_distance`);
  * `get_model_weights`: `(S -> ModelWeights)`, the window model (else x).

  With `client_state_transfer='files'`, `next` is `(<S@SERVER,
  {D*}@CLIENTS, {string}@CLIENTS> -> <S@SERVER, M@SERVER>)`: each client's
  file prefix in, its state read from and written to files next to it in
  the worker (`state_files`; `ClientStateRunner` does the driver's side).

  With `window_size` set, w^t is pushed into `S.window` after the server step
  (docs/design.md sec. 3.4). The clients start from
  `client.initial_client_state(model_fn, algorithm)`.

  An algorithm that keeps no client states (`keeps_client_state` False:
  FedCM, FedACG) gives a `tff.learning.templates.LearningProcess` instead:
  `next` is `(<S@SERVER, {D*}@CLIENTS> -> <state=S, metrics=M>@SERVER)`, and
  `set_model_weights` replaces x (`LearningProcessRunner` runs it).

  Args:
    model_fn: A no-arg callable returning a new
      `tff.learning.models.VariableModel` with floating-point weights.
    algorithm: The algorithm's math, a `ClientStateAlgorithm`.
    client_learning_rate: The client learning rate lr_l, positive.
    server_learning_rate: The server learning rate lr_g, positive.
    total_clients: N, the number of clients that may ever be sampled, >= 1.
    client_loss: `'ce'` (the model's loss) or `'wsm'` (docs/design.md sec.
      2; logits predictions, integer labels under `'y'` or at index 1).
    num_classes: The number of classes; required for `'wsm'`.
    client_weight_decay: wd >= 0: g(y) gains wd * y before the algorithm's
      correction, as PyTorch's SGD `weight_decay`; 0 adds nothing.
    client_sharpness: A `sharpness.Sharpness` (SAM or ASAM): g(y) is taken
      at y + e, the ascent step; None (default): plain.
    window_size: W >= 1 for a window of the last W global models; `None` for
      none.
    window_mode: `'evaluate'` (WiMA) or `'broadcast'` (IMA).
    window_start_round: The window is active from round
      max(W, window_start_round) on.
    loop_implementation: The clients' loop over their batches, a form of
      `client_loop.LOOP_FORMS`, or `None`: `client_loop.client_loop`'s.
    client_state_transfer: `'values'` (default: the states are TFF values)
      or `'files'` (files the driver and the workers share, `state_files`).
    client_learning_rate_fn: The clients' rate per round t (int32, 1-based;
      e.g. `scheduled_client_work.ima_client_learning_rate_fn`, IMA's), in
      the steps and the algorithm's `new_client_vector`; None (default):
      `client_learning_rate` every round.

  Returns:
    A `ClientStateProcess`, or a `LearningProcess` without client states.

  Raises:
    TypeError: If `algorithm` is not a `ClientStateAlgorithm` or
      `client_learning_rate_fn` is not callable.
    ValueError: Naming a bad argument (`checks`), e.g. a rate or N not
      positive, or a `model_fn` that does not build a `VariableModel` with
      floating-point weights.
  """
  checks.check_algorithm(algorithm, client_sharpness, client_state_transfer)
  argument_checks.check_number(
      'client_learning_rate', client_learning_rate, positive=True
  )
  argument_checks.check_number(
      'server_learning_rate', server_learning_rate, positive=True
  )
  total_clients = argument_checks.check_int(
      'total_clients', total_clients, minimum=1
  )
  client_training.check_client_loss(client_loss, num_classes)
  argument_checks.check_number(
      'client_weight_decay', client_weight_decay, minimum=0
  )
  if client_learning_rate_fn is not None and not callable(
      client_learning_rate_fn
  ):
    raise TypeError(
        '`client_learning_rate_fn` must be callable or None, got '
        f'{type(client_learning_rate_fn).__name__}.'
    )
  # The window is read every round (E = 1); its mode and start round are
  # checked without one too.
  window_math.check_window_args(
      window_size=1 if window_size is None else window_size,
      mode=window_mode,
      start_round=window_start_round,
      read_every=1,
      prefix='window_',
  )
  loop_implementation = client_loop.client_loop(loop_implementation)
  input_spec = checks.checked_input_spec(model_fn, algorithm, client_loss)
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(input_spec))
  with_window = window_size is not None

  initial_server_state_fn = _initial_state_computation(
      model_fn,
      algorithm,
      window_size=window_size,
      window_mode=window_mode,
      window_start_round=window_start_round,
  )

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_eval(initial_server_state_fn, tff.SERVER)

  server_state_type = initial_server_state_fn.type_signature.result

  @tff.tensorflow.computation(server_state_type)
  def get_model_weights_fn(state):
    return server.evaluation_model_weights(state, with_window=with_window)

  next_fn = next_fns.build_next(
      next_fns.NextParts(
          model_fn=model_fn,
          algorithm=algorithm,
          client_args=dict(
              client_learning_rate=client_learning_rate,
              client_learning_rate_fn=client_learning_rate_fn,
              client_loss=client_loss,
              num_classes=num_classes,
              weight_decay=float(client_weight_decay),
              sharpness=client_sharpness,
              loop_implementation=loop_implementation,
          ),
          server_args=dict(
              server_learning_rate=server_learning_rate,
              total_clients=total_clients,
              with_window=with_window,
              client_learning_rate_fn=client_learning_rate_fn,
          ),
          sends_round=(
              algorithm.tracks_rounds
              or algorithm.feature_step is not None
              or client_learning_rate_fn is not None
          ),
          server_state_type=server_state_type,
          data_type=data_type,
      ),
      client_state_transfer,
  )
  if not algorithm.keeps_client_state:
    return _learning_process(
        initialize_fn, next_fn, get_model_weights_fn, server_state_type
    )
  return ClientStateProcess(
      initialize_fn, next_fn, get_model_weights_fn, client_state_transfer
  )
