"""`ClientStateAlgorithm`: the math an algorithm with per-client state plugs in.

SCAFFOLD, FedDyn and their kin keep a model-sized vector per client (c_i)
and one on the server (c, h); everything around that math is shared and
written once in this package. A subclass sets its hooks (class attributes)
and writes its TF math, traced inside the client's or the server's
`tff.tensorflow.computation`: `gradient_transform` and `step_input` (the
local step's corrected gradient), `new_client_vector` and `server_update`.
The optional hooks, and which algorithm needs each (FedCM and FedACG keep
no client state, AdaBest tracks rounds, MIME uses full gradients, FedFA a
feature step), are in docs/design.md secs. 4.9 and 4.10.
"""

import abc
from typing import Any, NamedTuple

import tensorflow as tf

from tff_fedwin.algorithms import step_hooks


class ClientRound(NamedTuple):
  """What `new_client_vector` gets of a client's round (TF values).

  Attributes:
    client_vector: Its vector before the round.
    server_vector: The server's vector it received.
    model_delta: x - y, the trainable structure.
    num_steps: K, an int64 scalar (0 for a client without data).
    learning_rate: lr.
    rounds_since_last: t - t_i', float32: the rounds since the client last
      trained (with `tracks_rounds`; else 1).
  """

  client_vector: Any
  server_vector: Any
  model_delta: Any
  num_steps: tf.Tensor
  learning_rate: float
  rounds_since_last: tf.Tensor


class ServerRound(NamedTuple):
  """What `server_update` gets of the round (TF values).

  Attributes:
    trainable: x.
    server_vector: The server's vector.
    mean_model_delta: sum_i w_i (y_i - s_i) / sum_i w_i over the round's
      clients with data (w_i = 1 for a client with data, else 0; s_i the
      `client_start` weights, x by default); zeros when no client had
      data (the process then keeps x).
    vector_delta_sum: sum over the round's clients of (new vector - old)
      (without client states: of the vectors they send).
    client_weight_sum: sum_i w_i, the number of clients with data (float32).
    total_clients: N, the population size.
    server_learning_rate: lr_g.
  """

  trainable: Any
  server_vector: Any
  mean_model_delta: Any
  vector_delta_sum: Any
  client_weight_sum: tf.Tensor
  total_clients: int
  server_learning_rate: float


class ClientStateAlgorithm(abc.ABC):
  """The algorithm-specific math of a per-client-state process.

  Notation: x the global trainable weights a client receives, y its weights
  after K local steps with learning rate lr, `client_vector` the client's
  own vector (c_i for SCAFFOLD), `server_vector` the server's (c). Every
  vector has the structure of x. A subclass is immutable: its
  hyperparameters are set in `__init__` and checked there.

  Attributes:
    name: The `--algorithm` value, e.g. `'scaffold'` (a subclass sets it).
    keeps_client_state: Whether each client keeps its vector between rounds
      (default True). False: `client_vector` is None in `step_input` and
      `new_client_vector`, whose result is the vector the client sends
      (`vector_delta_sum` sums those), and the process is a
      `tff.learning.templates.LearningProcess`.
    tracks_rounds: Whether a client's state also keeps the round it last
      trained in (a `types.RoundClientState`; default False);
      `new_client_vector` then gets t - t_i', otherwise 1.
    uses_full_gradient: Whether the round starts with the clients'
      full-batch gradients at x (default False; only without client
      states); the round's server vector is then `round_vector` of their
      mean.
    subtracts_start_gradient: Whether each local step's gradient is
      g(y; b) - g(s; b), b the batch and s the client's start weights
      (MIME's correction; default False).
  """

  name: str
  keeps_client_state = True
  tracks_rounds = False
  uses_full_gradient = False
  subtracts_start_gradient = False

  def initial_server_vector(self, trainable: Any) -> Any:
    """The server's vector before round 1 (TF), from x^0; default zeros."""
    return tf.nest.map_structure(tf.zeros_like, trainable)

  def client_start(self, trainable: Any, server_vector: Any) -> Any:
    """The trainable weights a client starts from (TF); default x itself.

    The client's model delta, and so `mean_model_delta`, is taken from
    these weights.
    """
    del server_vector  # Unused.
    return trainable

  def round_vector(self, server_vector: Any, full_gradient: Any) -> Any:
    """The server's vector for the round (TF), from the mean full-batch
    gradient at x of the round's clients with data; the clients step with
    it and `server_update` gets it. Only called with `uses_full_gradient`."""
    raise NotImplementedError(f'{self.name} does not use full gradients.')

  @property
  def feature_step(self) -> step_hooks.FeatureStep | None:
    """A step that reads the model's features (FedFA's anchors; default
    None). With one, the model must be a `FeatureModel`, the clients get
    the round, and the vector a client sends is the step's `sent_vector`
    (`new_client_vector` is not called); only without client states."""
    return None

  @property
  def gradient_transform(self) -> step_hooks.GradientTransform | None:
    """`(g, y, step_input) -> g'`, the gradient the local SGD steps with;
    default None, the plain gradient g."""
    return None

  def step_input(
      self, initial_trainable: Any, server_vector: Any, client_vector: Any
  ) -> Any:
    """What `gradient_transform` reads, from x, the server's and the client's
    vectors (TF, called once per client before its loop, only with a
    `gradient_transform`); default the server's vector."""
    del initial_trainable, client_vector  # Unused.
    return server_vector

  @abc.abstractmethod
  def new_client_vector(self, r: ClientRound) -> Any:
    """The client's vector after its local training (TF).

    Args:
      r: The client's round, a `ClientRound`.

    Returns:
      The new vector, the structure of `r.client_vector`; `r.client_vector`
      itself (same values) when K = 0.
    """

  @abc.abstractmethod
  def server_update(self, r: ServerRound) -> tuple[Any, Any]:
    """The new x and server vector (TF).

    Args:
      r: The server's round, a `ServerRound`.

    Returns:
      `(new_trainable, new_server_vector)`, the structures of the inputs.
    """


def sgd_step(trainable: Any, direction: Any, learning_rate: float) -> Any:
  """`x + lr d` leaf by leaf: a server step along the round's direction d
  (SCAFFOLD's and FedCM's mean model delta, FedACG's momentum)."""
  return tf.nest.map_structure(
      lambda x, d: x + tf.cast(learning_rate, x.dtype) * d, trainable, direction
  )


def with_data(client_weight_sum: tf.Tensor, new: Any, old: Any) -> Any:
  """`new` leaf by leaf if a client of the round had data, else `old`: a
  server vector a round without data keeps."""
  return tf.nest.map_structure(
      lambda n, o: tf.where(client_weight_sum > 0, n, o), new, old
  )
