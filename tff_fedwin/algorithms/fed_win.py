"""FedAvg-family learning processes with an exact window (WiMA, IMA).

`build_fed_win` assembles a `tff.learning.templates.LearningProcess` from TFF's
own parts (broadcast distributor, model-delta client work, aggregator, the
apply-optimizer finalizer) and puts the window *after* the server optimizer, so
it holds the post-optimizer global models for any server optimizer (WiMA Eq. 7:
"built using any server-side optimizer"): SGD, SGD with momentum (FedAvgM),
Adam, Yogi. Optimizer state is neither averaged nor reset (docs/design.md
sec. 1).
"""

from collections.abc import Callable
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.aggregators import window_finalizer
from tff_fedwin.aggregators import window_math
from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import client_training
from tff_fedwin.algorithms import client_work as client_work_lib
from tff_fedwin.algorithms import fednova as fednova_lib
from tff_fedwin.algorithms import scheduled_client_work
from tff_fedwin.algorithms import sharpness as sharpness_lib

ClientLearningRateFn = scheduled_client_work.ClientLearningRateFn


def build_fed_win(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    window_size: Optional[int] = None,
    window_mode: str = 'evaluate',
    window_start_round: int = 0,
    window_read_every: int = 1,
    client_learning_rate_fn: Optional[ClientLearningRateFn] = None,
    client_loss: str = 'ce',
    num_classes: Optional[int] = None,
    proximal_strength: float = 0.0,
    client_weight_decay: float = 0.0,
    client_sharpness: Optional[sharpness_lib.Sharpness] = None,
    fednova: Optional[fednova_lib.FedNova] = None,
    client_weighting: tff.learning.ClientWeighting = (
        tff.learning.ClientWeighting.NUM_EXAMPLES
    ),
    model_aggregator: Optional[
        tff.aggregators.WeightedAggregationFactory
    ] = None,
    metrics_aggregator: Optional[Any] = None,
    loop_implementation: Optional[client_loop.LoopForm] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds FedAvg (or FedAvgM, FedAdam, FedYogi) with an exact model window.

  The process is TFF's FedAvg (McMahan et al. 2017) composed from
  `tff.learning.templates` parts, with a window finalizer after the server
  optimizer (WiMA Eq. 4/7; IMA Algorithm 1). Methods:

  * `initialize`: `( -> S@SERVER)`, `S` a
    `tff.learning.templates.LearningAlgorithmState` whose `finalizer` is a
    `tff_fedwin.aggregators.window_finalizer.WindowFinalizerState` when
    `window_size` is set.
  * `next`: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`;
    `metrics['finalizer']['window']` has `window_fill`, `window_active` and
    `window_distance` (||window model - w^t||_2).
  * `get_model_weights`: `(S -> ModelWeights)`: the window model (WiMA: the
    model evaluated and exported); the global model when there is no window or
    it is not active. `tff_fedwin.aggregators.window_model_weights(state)`
    computes the same in numpy without a TFF call.

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    client_optimizer_fn: The client `tff.learning.optimizers.Optimizer`.
    server_optimizer_fn: The server optimizer; defaults to SGD(1.0) (FedAvg).
      SGD with momentum gives FedAvgM, Adam/Yogi give FedAdam/FedYogi.
    window_size: W >= 1; `None` builds plain FedAvg (no window).
    window_mode: `'evaluate'` (WiMA) or `'broadcast'` (IMA).
    window_start_round: The window model is active from round
      max(W, window_start_round) (IMA's t_s).
    window_read_every: E: the window model is needed only at rounds t % E == 0;
      the state keeps ceil(W/E) model-sized slots. 1 in `'broadcast'` mode.
    client_learning_rate_fn: Optional per-round client learning rate,
      round number (1-based int32 tensor) -> rate, traced with TensorFlow;
      `ima_client_learning_rate_fn` is IMA's schedule.
    client_loss: `'ce'`: the model's own loss;
      `'wsm'`: the WSM re-weighted softmax cross-entropy (docs/design.md
      sec. 2), each client computing its class proportions from its own data
      every round; the model's predictions must be logits and labels are
      under key `'y'`.
      Reported metrics always use the model's plain loss.
    num_classes: Number of classes; required for `client_loss='wsm'`.
    proximal_strength: FedProx mu >= 0 (Li et al. 2020, Eq. 2): the clients
      add mu (w - w_global) to every gradient, with either loss. (TFF 0.87's
      `build_weighted_fed_prox` adds it with the opposite sign; docs/design.md
      sec. 2.)
    client_weight_decay: wd >= 0: the clients add wd * w to every gradient
      before their optimizer step, as PyTorch's SGD `weight_decay` (the IMA
      and WiMA authors' client SGD); 0 (default) adds nothing.
    client_sharpness: A `sharpness.Sharpness` for FedSAM or FedASAM clients
      (Caldarola et al. 2022): each step's gradient is taken at w + e, SAM's
      or ASAM's ascent step; None (default): plain steps.
    fednova: A `fednova.FedNova` for FedNova (Wang et al. 2020): the clients
      send their update divided by their effective step count a_i, and the
      aggregate is tau_eff times the weighted mean of those, tau_eff the
      weighted mean of a_i (`fednova.FedNovaFactory` around
      `model_aggregator`), before the server optimizer and the window; None
      (default): FedAvg's mean update.
    client_weighting: A `tff.learning.ClientWeighting`.
    model_aggregator: Aggregation of client deltas; default
      `tff.aggregators.MeanFactory()`.
    metrics_aggregator: As in `tff.learning.algorithms.build_weighted_fed_avg`.
    loop_implementation: The client's loop over its dataset, as in
      `tff.learning.algorithms.build_weighted_fed_avg` (whose default is
      `DATASET_REDUCE`), or `client_loop.HELD_BATCHES`; the same arithmetic
      either way. `None` (default) is `HELD_BATCHES`: one pass over the
      client's dataset into tensors, then the steps over those (faster here,
      results/performance_history.md sec. 6.3; `client_loop.client_loop`).

  Returns:
    A `tff.learning.templates.LearningProcess`.
  """
  client_training.check_client_loss(client_loss, num_classes)
  loop_implementation = client_loop.client_loop(loop_implementation)
  window_args = None
  if window_size is not None:
    window_args = dict(
        window_size=window_size,
        mode=window_mode,
        start_round=window_start_round,
        read_every=window_read_every,
    )
    window_math.check_window_args(**window_args, prefix='window_')
  if server_optimizer_fn is None:
    server_optimizer_fn = tff.learning.optimizers.build_sgdm(learning_rate=1.0)
  if model_aggregator is None:
    model_aggregator = tff.aggregators.MeanFactory()

  @tff.tensorflow.computation()
  def initial_model_weights_fn():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  model_weights_type = initial_model_weights_fn.type_signature.result
  distributor = tff.learning.templates.build_broadcast_process(
      model_weights_type
  )
  client_work = client_work_lib.build_client_work(
      model_fn,
      client_optimizer_fn,
      client_loss=client_loss,
      num_classes=num_classes,
      proximal_strength=proximal_strength,
      weight_decay=client_weight_decay,
      sharpness=client_sharpness,
      fednova=fednova,
      client_weighting=client_weighting,
      metrics_aggregator=metrics_aggregator,
      loop_implementation=loop_implementation,
  )
  if client_learning_rate_fn is not None:
    client_work = scheduled_client_work.build_scheduled_client_work(
        client_work, client_learning_rate_fn
    )
  update_type = model_weights_type.trainable
  if fednova is not None:
    # The clients send (d_i, a_i); the aggregate is FedNova's Delta.
    model_aggregator = fednova_lib.FedNovaFactory(model_aggregator)
    update_type = client_work.next.type_signature.result.result.member.update
  aggregator = model_aggregator.create(
      update_type, tff.TensorType(tf.float32.as_numpy_dtype)
  )
  if window_args is None:
    finalizer = tff.learning.templates.build_apply_optimizer_finalizer(
        server_optimizer_fn, model_weights_type
    )
  else:
    finalizer = window_finalizer.build_window_finalizer(
        server_optimizer_fn, model_weights_type, **window_args
    )
  composed = tff.learning.templates.compose_learning_process(
      initial_model_weights_fn, distributor, client_work, aggregator, finalizer
  )
  if window_args is None:
    return composed
  return _with_window_model_weights(composed)


def _with_window_model_weights(
    composed: tff.learning.templates.LearningProcess,
) -> tff.learning.templates.LearningProcess:
  """`composed` whose `get_model_weights` returns the window model.

  `get_model_weights`: `(S -> ModelWeights)`, the window mean m^t at active
  rounds in `'evaluate'` mode, else the global model.
  """
  state_type = composed.initialize.type_signature.result.member

  @tff.tensorflow.computation(state_type)
  def get_model_weights(state):
    trainable = window_math.evaluated_trainable(
        state.finalizer.window, state.global_model_weights.trainable
    )
    return tff.learning.models.ModelWeights(
        trainable, state.global_model_weights.non_trainable
    )

  return tff.learning.templates.LearningProcess(
      composed.initialize,
      composed.next,
      get_model_weights,
      composed.set_model_weights,
      get_hparams_fn=composed.get_hparams,
      set_hparams_fn=composed.set_hparams,
  )
