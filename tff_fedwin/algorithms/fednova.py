"""FedNova: normalized averaging of the clients' updates (Wang et al. 2020).

FedNova ("Tackling the Objective Inconsistency Problem in Heterogeneous
Federated Optimization", NeurIPS 2020; a baseline of IMA's Table 1) lets
each client divide its update by its count of local steps, so clients that
run more steps do not pull the model toward their own objective:

    d_i = (w - w_i) / a_i,   a_i = (tau_i - rho (1 - rho^tau_i) / (1 - rho))
                                   / (1 - rho)          (a_i = tau_i, rho = 0)
    Delta = tau_eff * sum_i p_i d_i,   tau_eff = sum_i p_i a_i

with tau_i the client's local steps, rho its SGD momentum and p_i its share of
the round's examples; the server then steps with Delta as FedAvg's with its
mean update (server SGD with rate 1: w - Delta, the IMA authors'
`utils/aggregator.py`, `agg_mode='fednova'`). Two pieces, each in the TFF
role it plays (docs/design.md, "FedNova"):

* the client's part, `normalized_update`: its result's update is
  `(d_i, a_i)` instead of w - w_i (`build_client_work(fednova=...)`);
* the server's part, `FedNovaFactory`: a weighted aggregation of `(d_i,
  a_i)` whose result is Delta, the model delta every finalizer (server
  optimizer, window) takes.
"""

import collections
from typing import Any, NamedTuple, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks


class FedNova(NamedTuple):
  """FedNova's clients.

  Attributes:
    client_momentum: rho in [0, 1), the momentum of the clients' SGD (TFF's
      SGDM: a = rho a + g, as PyTorch's), which sets a_i.
  """

  client_momentum: float = 0.0


def build_fednova(client_momentum: float = 0.0) -> FedNova:
  """A checked `FedNova`.

  Raises:
    ValueError: naming `client_momentum`, unless in [0, 1).
  """
  checks.check_number('client_momentum', client_momentum, minimum=0)
  if not client_momentum < 1:
    raise ValueError(
        f'`client_momentum` must be in [0, 1); got {client_momentum!r}.'
    )
  return FedNova(float(client_momentum))


def check_fednova(fednova: Any) -> None:
  """Raises TypeError unless `fednova` is a `FedNova` or None."""
  if fednova is not None and not isinstance(fednova, FedNova):
    raise TypeError(
        '`fednova` must be a tff_fedwin.algorithms.fednova.FedNova '
        f'(build_fednova) or None, got {type(fednova).__name__}.'
    )


def effective_steps(num_steps: tf.Tensor, momentum: float) -> tf.Tensor:
  """a_i of `num_steps` tau_i local SGD steps with momentum rho (float32).

  `(int64, float) -> float32`: (tau - rho (1 - rho^tau) / (1 - rho)) /
  (1 - rho), the sum over the steps of each gradient's total weight in the
  update (FedNova's a_i for momentum SGD, as the IMA authors'
  `utils/optimizer.py`, `fednova_optimizer`); tau itself for rho = 0.
  """
  tau = tf.cast(num_steps, tf.float32)
  if not momentum:
    return tau
  rho = tf.constant(momentum, tf.float32)
  return (tau - rho * (1.0 - tf.pow(rho, tau)) / (1.0 - rho)) / (1.0 - rho)


def normalized_update(update: Any, num_steps: tf.Tensor, fednova: FedNova):
  """The client's FedNova result: `OrderedDict(normalized=d_i, steps=a_i)`.

  d_i = `update` / a_i (`update` is w - w_i); a client without steps sends
  zeros (its weight is 0 too).
  """
  steps = effective_steps(num_steps, fednova.client_momentum)
  normalized = tf.nest.map_structure(
      lambda u: tf.math.divide_no_nan(u, tf.cast(steps, u.dtype)), update
  )
  return collections.OrderedDict(normalized=normalized, steps=steps)


class FedNovaFactory(tff.aggregators.WeightedAggregationFactory):
  """FedNova's server step as a weighted aggregation of `(d_i, a_i)`.

  `create(value_type, weight_type)` takes the clients' `OrderedDict(
  normalized=T, steps=float32)` and returns an `AggregationProcess` whose
  result is Delta = tau_eff * d (of type T): `inner`'s weighted mean of the
  pair, d and tau_eff, multiplied. Type signatures, S `inner`'s state:

    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, <normalized=T, steps=float32>@CLIENTS,
            float32@CLIENTS> -> <state=S@SERVER, result=T@SERVER,
            measurements=M@SERVER>)`
  """

  def __init__(
      self, inner: Optional[tff.aggregators.WeightedAggregationFactory] = None
  ):
    """`inner`: the weighted mean (default `tff.aggregators.MeanFactory()`)."""
    self._inner = inner or tff.aggregators.MeanFactory()

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    inner = self._inner.create(value_type, weight_type)
    mean_type = inner.next.type_signature.result.result.member

    @tff.tensorflow.computation(mean_type)
    def scale(mean):
      return tf.nest.map_structure(
          lambda d: tf.cast(mean['steps'], d.dtype) * d, mean['normalized']
      )

    @tff.federated_computation(
        inner.initialize.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS),
    )
    def next_fn(state, value, weight):
      output = inner.next(state, value, weight)
      return tff.templates.MeasuredProcessOutput(
          output.state,
          tff.federated_map(scale, output.result),
          output.measurements,
      )

    return tff.templates.AggregationProcess(inner.initialize, next_fn)
