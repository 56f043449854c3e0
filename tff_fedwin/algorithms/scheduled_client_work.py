"""Client work whose learning rate follows a per-round schedule (IMA).

`build_scheduled_client_work` wraps a model-delta client work and sets its
optimizer's `learning_rate` each round; the `*_client_learning_rate_fn`s are
the schedules: IMA's and its baselines' (docs/design.md, "IMA's client
learning-rate schedule") and FedSWA's (docs/design.md, "Server-side SWA
(WiMA's comparison)").
"""

import collections
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks

ClientLearningRateFn = Callable[[tf.Tensor], tf.Tensor]


class ScheduledClientWorkState(NamedTuple):
  """State of a client work whose learning rate follows a per-round schedule.

  Attributes:
    hparams: The wrapped client work's state (its optimizer hyperparameters).
    round_num: int32, rounds completed.
  """

  hparams: Any
  round_num: Any


def rate_of_next_round(
    client_learning_rate_fn: ClientLearningRateFn, completed_rounds: Any
) -> tf.Tensor:
  """lr_t of the round being run, t = `completed_rounds` + 1 (float32, TF)."""
  return tf.cast(
      client_learning_rate_fn(tf.cast(completed_rounds, tf.int32) + 1),
      tf.float32,
  )


def build_scheduled_client_work(
    client_work: tff.learning.templates.ClientWorkProcess,
    client_learning_rate_fn: ClientLearningRateFn,
) -> tff.learning.templates.ClientWorkProcess:
  """Wraps a model-delta client work: round t uses `client_learning_rate_fn(t)`.

  TFF's `build_model_delta_client_work` keeps the client optimizer's
  hyperparameters in its state and broadcasts them every round; this wrapper
  sets `learning_rate` to `client_learning_rate_fn(t)` (t = 1, 2, ...) before
  each round and reports it as `client_learning_rate` in the measurements.

  Args:
    client_work: A `ClientWorkProcess` whose state is an optimizer hparams
      dict with a `learning_rate` entry.
    client_learning_rate_fn: Maps the round number (int32 tensor, 1-based) to
      the learning rate; traced with TensorFlow.
  """
  hparams_type = client_work.initialize.type_signature.result.member
  if 'learning_rate' not in tff.structure.name_list(hparams_type):
    raise ValueError(
        '`client_learning_rate_fn` needs a client optimizer with a '
        f'`learning_rate` hyperparameter; its hyperparameters are '
        f'{hparams_type}.'
    )

  @tff.tensorflow.computation(hparams_type, tf.int32)
  def hparams_for_round_fn(hparams, round_num):
    learning_rate = client_learning_rate_fn(round_num + 1)
    hparams = collections.OrderedDict(hparams)
    hparams['learning_rate'] = tf.cast(
        learning_rate, hparams['learning_rate'].dtype
    )
    return hparams, round_num + 1

  @tff.federated_computation()
  def init_fn():
    return tff.federated_zip(
        ScheduledClientWorkState(
            client_work.initialize(), tff.federated_value(0, tff.SERVER)
        )
    )

  measurements_type = client_work.next.type_signature.result.measurements.member

  @tff.tensorflow.computation(measurements_type, hparams_type)
  def add_learning_rate_fn(measurements, hparams):
    measurements = collections.OrderedDict(measurements)
    measurements['client_learning_rate'] = hparams['learning_rate']
    return measurements

  _, weights_type, data_type = client_work.next.type_signature.parameter

  @tff.federated_computation(
      init_fn.type_signature.result, weights_type, data_type
  )
  def next_fn(state, weights, client_data):
    hparams, round_num = tff.federated_map(
        hparams_for_round_fn, (state.hparams, state.round_num)
    )
    output = client_work.next(hparams, weights, client_data)
    return tff.templates.MeasuredProcessOutput(
        state=tff.federated_zip(
            ScheduledClientWorkState(output.state, round_num)
        ),
        result=output.result,
        measurements=tff.federated_map(
            add_learning_rate_fn, (output.measurements, hparams)
        ),
    )

  return tff.learning.templates.ClientWorkProcess(init_fn, next_fn)


def exponential_client_learning_rate_fn(
    initial_learning_rate: float, decay: float = 0.99
) -> ClientLearningRateFn:
  """lr_t = lr0 * decay^t, rounds t = 1, 2, ... (IMA's baselines, Table 7).

  The IMA paper trains its no-IMA baselines with a per-round lr decay of 0.01
  (decay = 0.99), the schedule `ima_client_learning_rate_fn` follows up to t_s.

  Args:
    initial_learning_rate: lr0 > 0.
    decay: Per-round decay, in (0, 1].

  Returns:
    A function of the round number usable as `client_learning_rate_fn`.
  """
  checks.check_number(
      'initial_learning_rate', initial_learning_rate, positive=True
  )
  if not 0.0 < decay <= 1.0:
    raise ValueError(f'`decay` must be in (0, 1]; got {decay!r}.')

  def learning_rate_fn(round_num):
    t = tf.cast(round_num, tf.float32)
    return initial_learning_rate * tf.pow(decay, t)

  return learning_rate_fn


def ima_client_learning_rate_fn(
    initial_learning_rate: float,
    start_round: int,
    *,
    decay_before: float = 0.99,
    decay_after: float = 0.97,
) -> ClientLearningRateFn:
  """IMA's "mild client exploration" schedule (IMA code, Table 7).

  lr_t = lr0 * decay_before^t                                  for t < t_s,
  lr_t = lr0 * decay_before^t_s * decay_after^(t - t_s)       for t >= t_s,

  with rounds t = 1, 2, ... (docs/design.md sec. 1).

  Args:
    initial_learning_rate: lr0 > 0.
    start_round: t_s >= 0, IMA's start round.
    decay_before: Per-round decay before t_s.
    decay_after: Per-round decay from t_s on.

  Returns:
    A function of the round number usable as `client_learning_rate_fn`.
  """

  def after(t):
    t_s = tf.constant(float(start_round), tf.float32)
    return (
        initial_learning_rate
        * tf.pow(decay_before, t_s)
        * tf.pow(decay_after, t - t_s)
    )

  return _from_start_round(
      initial_learning_rate, start_round, decay_before, after, check=False
  )


def _from_start_round(
    initial_learning_rate: float,
    start_round: int,
    decay_before: float,
    after: Callable[[tf.Tensor], tf.Tensor],
    check: bool = True,
) -> ClientLearningRateFn:
  """lr0 * decay_before^t for t < t_s, `after(t)` from t_s on (t float).

  `check`: whether `decay_before` must be in (0, 1].
  """
  checks.check_number(
      'initial_learning_rate', initial_learning_rate, positive=True
  )
  checks.check_int('start_round', start_round, minimum=0)
  if check and not 0.0 < decay_before <= 1.0:
    raise ValueError(f'`decay_before` must be in (0, 1]; got {decay_before!r}.')

  def learning_rate_fn(round_num):
    t = tf.cast(round_num, tf.float32)
    before = initial_learning_rate * tf.pow(decay_before, t)
    return tf.where(t < float(start_round), before, after(t))

  return learning_rate_fn


def ima_constant_client_learning_rate_fn(
    initial_learning_rate: float,
    start_round: int,
    low_rate: float,
    *,
    decay_before: float = 0.99,
) -> ClientLearningRateFn:
  """IMA's "small constant lr" decay scheme (IMA Table 3, "Const LR").

  lr_t = lr0 * decay_before^t     for t < t_s,
  lr_t = low_rate                 for t >= t_s,

  with rounds t = 1, 2, ... (the IMA paper's ablation uses low_rate = 5e-5).

  Args:
    initial_learning_rate: lr0 > 0.
    start_round: t_s >= 0, IMA's start round.
    low_rate: The rate from t_s on, > 0.
    decay_before: Per-round decay before t_s, in (0, 1].

  Returns:
    A function of the round number usable as `client_learning_rate_fn`.
  """
  checks.check_number('low_rate', low_rate, positive=True)
  return _from_start_round(
      initial_learning_rate,
      start_round,
      decay_before,
      lambda t: tf.fill(tf.shape(t), tf.constant(low_rate, tf.float32)),
  )


def ima_cyclic_client_learning_rate_fn(
    initial_learning_rate: float,
    start_round: int,
    low_rate: float,
    cycle: int,
    *,
    decay_before: float = 0.99,
) -> ClientLearningRateFn:
  """IMA's cyclic decay scheme (IMA Table 3, "Cyclic Decay").

  IMA sec. 7.3.2: the rate decays "from 1e-2 to 5e-5 every 20 rounds". From
  t_s on, every cycle of c rounds falls linearly from the rate reached at t_s,
  lr_max = lr0 * decay_before^t_s (where the authors' code starts its cycles),
  to `low_rate`:

  lr_t = lr0 * decay_before^t                                   for t < t_s,
  lr_t = lr_max - ((t - t_s) mod c) / (c - 1) * (lr_max - low_rate)  for t >= t_s,

  with rounds t = 1, 2, ...: lr_max at t_s and every c rounds after it,
  `low_rate` at the cycle's last round (where the authors' code differs:
  docs/design.md, "IMA's client learning-rate schedule").

  Args:
    initial_learning_rate: lr0 > 0.
    start_round: t_s >= 0, IMA's start round.
    low_rate: The bottom of each cycle, in (0, lr_max).
    cycle: c >= 2, rounds per cycle.
    decay_before: Per-round decay before t_s, in (0, 1].

  Returns:
    A function of the round number usable as `client_learning_rate_fn`.
  """
  checks.check_number('low_rate', low_rate, positive=True)
  checks.check_int('cycle', cycle, minimum=2)
  checks.check_int('start_round', start_round, minimum=0)
  top = initial_learning_rate * decay_before**start_round
  if not low_rate < top:
    raise ValueError(
        '`low_rate` must be below the rate reached at `start_round`, '
        f'initial_learning_rate * decay_before^start_round = {top!r}; got '
        f'{low_rate!r}.'
    )
  step = (top - low_rate) / (cycle - 1)

  def after(t):
    return top - tf.math.floormod(t - float(start_round), float(cycle)) * step

  return _from_start_round(
      initial_learning_rate, start_round, decay_before, after
  )


def swa_cyclic_client_learning_rate_fn(
    initial_learning_rate: float,
    start_round: int,
    low_rate: float,
    cycle: int,
) -> ClientLearningRateFn:
  """FedSWA's cyclic client rate (Caldarola et al. 2022, after SWA's).

  The authors' `schedule_cycling_lr(round, c, lr1, lr2)` (debcaldarola/fedsam)
  on our rounds t = 1, 2, ... (docs/design.md, "Server-side SWA (WiMA's
  comparison)"):

  lr_t = lr1                                    for t < t_s,
  lr_t = (1 - a_t) * lr1 + a_t * lr2            for t >= t_s,
  a_t = ((t - 1) mod c + 1) / c,

  lr1 = `initial_learning_rate`, lr2 = `low_rate`, t_s = S + 1 for their
  `swa_start` S (`tff_fedwin.algorithms.SwaRunner`); a_t counts from the
  absolute round, as theirs.

  Args:
    initial_learning_rate: lr1 > 0, the rate before t_s.
    start_round: t_s >= 1, the first round of the cyclic rate.
    low_rate: lr2 > 0 (the authors' `--swa-lr`, default 1e-4).
    cycle: c >= 2, rounds per cycle (the authors' `--swa-c`).

  Returns:
    A function of the round number usable as `client_learning_rate_fn`.
  """
  checks.check_number('low_rate', low_rate, positive=True)
  checks.check_int('cycle', cycle, minimum=2)
  checks.check_int('start_round', start_round, minimum=1)

  def after(t):
    a = (tf.math.floormod(t - 1.0, float(cycle)) + 1.0) / float(cycle)
    return (1.0 - a) * initial_learning_rate + a * low_rate

  return _from_start_round(initial_learning_rate, start_round, 1.0, after)
