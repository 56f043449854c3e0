"""The immutable values a per-client-state process passes around.

The vectors keep SCAFFOLD's name, `control_variate`, for every algorithm of
the family (`algorithm.ClientStateAlgorithm`): SCAFFOLD's c and c_i,
FedDyn's h and the client's last gradient. One set of types keeps the
stores, the state files and the checkpoints algorithm-free.
"""

from typing import Any, NamedTuple


class ServerState(NamedTuple):
  """The server state.

  Attributes:
    global_model_weights: The global model x, a
      `tff.learning.models.ModelWeights` (trainable and non-trainable).
    control_variate: The server's vector (SCAFFOLD's c, FedDyn's h), same
      structure as `global_model_weights.trainable`.
    round_num: Number of completed rounds, an int64 scalar.
    window: With a window (`window_size` set), a
      `tff_fedwin.aggregators.WindowBuffer` of the post-server-step trainable
      weights w^t; `()` (an empty structure) without a window.
  """

  global_model_weights: Any
  control_variate: Any
  round_num: Any
  window: Any = ()


class ClientState(NamedTuple):
  """The persistent state of one client.

  Attributes:
    control_variate: The client's vector (SCAFFOLD's c_i, FedDyn's gradient
      of its loss at its last model), same structure as the model's
      trainable weights.
  """

  control_variate: Any


class RoundClientState(NamedTuple):
  """A client's state for an algorithm that also keeps the round it last
  took part in (`ClientStateAlgorithm.tracks_rounds`: AdaBest).

  Attributes:
    control_variate: The client's vector, as `ClientState`'s.
    last_round: float32 scalar, the last round t in which the client trained
      (0 before its first); a float so the state files read it as raw bytes
      (exact up to 2^24 rounds).
  """

  control_variate: Any
  last_round: Any


class ClientResult(NamedTuple):
  """What one client's local step reports.

  Attributes:
    model_delta: dy = y - x on the trainable weights (zeros for an empty
      dataset).
    control_variate_delta: The change of the client's vector (zeros for an
      empty dataset).
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


class RoundSums(NamedTuple):
  """The per-client values summed over the sampled clients in one round."""

  weighted_model_delta: Any
  weighted_non_trainable_weights: Any
  control_variate_delta: Any
  client_weight: Any
  num_examples: Any
  loss_sum: Any
  num_clients_with_data: Any
