"""FedFA (Zhou et al. 2023): feature anchors, one module of math.

"FedFA: Federated Learning with Feature Anchors to Align Features and
Classifiers for Heterogeneous Data" (arXiv:2211.09299; a baseline of IMA's
Table 1), as the IMA authors' code runs it (`TailinZhou/FedIMA`,
`utils/optimizer.py`'s `fedfa_cl_optimizer`, `utils/AnchorLoss.py`;
docs/design.md sec. 4.10). The model is a feature extractor phi and a
classifier h, its last layer (a `step_hooks.HasFeatures` model). Besides
FedAvg's model x the server keeps C class anchors A (C x d), at first the
first C rows of the d x d identity. A client in round t (t - 1 rounds
completed) runs, per batch b, from y = x:

    loss_b = CE_b(y) + [t > 1] lambda / C sum_{c in b}
             mean_{i in b, y_i = c} ||phi(x_i) - A_c||^2        (anchor loss)
    y <- y - lr grad loss_b                                     (SGD)
    if t >= S: one Adam step on h (rate 1e-3, state fresh each round)
      with the loss mean_c CE(h(A_c), c)             (classifier calibration)
    s_c += mean_{i in b, y_i = c} phi(x_i), phi before the step.

After its K steps it sends A_i: A_i,c = m A_c + (1 - m) s_c / K for each
class c it holds, A_c for the rest; the server takes x+ = x + lr_g mean_i
(y_i - x) and A+ = sum_i n_i A_i / sum_i n_i, n_i the client's examples.
lambda = 0.1 is the code's, and so is S: its rounds t with t - 1 > R / 4 of R
(S = floor(R / 4) + 2); the anchor momentum m is 0.5 in the code and 0.9 in
IMA's Table 5. The code updates the anchors after each
epoch; here after the round, the same for one local epoch (our epochs'
batches run on across epoch ends: there is no epoch end to update at).
"""

from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin import checks
from tff_fedwin.algorithms import step_hooks
from tff_fedwin.algorithms.client_state import algorithm
from tff_fedwin.algorithms.client_state import process

# PyTorch's `torch.optim.Adam` defaults, the calibration's optimizer.
ADAM_RATE, ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 1e-3, 0.9, 0.999, 1e-8


class AnchorState(NamedTuple):
  """A FedFA client's feature state over its loop.

  Attributes:
    anchors: A, the server's anchors [C, d] (fixed over the loop).
    anchor_loss_on: 1.0 from round 2 on, else 0.0.
    calibrate: 1.0 in the rounds with the classifier calibration, else 0.0.
    adam_m, adam_v: Adam's moments, one per classifier variable.
    adam_steps: Adam's step count (float32).
    feature_sums: s, the sums of the batches' class feature means [C, d].
    seen: 1.0 for the classes the client's batches held [C].
    num_batches: K (float32).
  """

  anchors: Any
  anchor_loss_on: Any
  calibrate: Any
  adam_m: Any
  adam_v: Any
  adam_steps: Any
  feature_sums: Any
  seen: Any
  num_batches: Any


def anchor_loss(features, labels, anchors, anchor_lambda):
  """lambda / C sum_{c in b} mean_{i: y_i = c} ||phi_i - A_c||^2
  (`AnchorLoss.forward`: lambda sum_i ||phi_i - A_{y_i}||^2 / n_{y_i} / C)."""
  labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
  num_classes = tf.shape(anchors)[0]
  counts = tf.reduce_sum(tf.one_hot(labels, num_classes), axis=0)
  squared = tf.reduce_sum(tf.square(features - tf.gather(anchors, labels)), 1)
  per_example = squared / tf.gather(counts, labels)
  return (
      anchor_lambda
      * tf.reduce_sum(per_example)
      / tf.cast(num_classes, tf.float32)
  )


def class_feature_means(features, labels, num_classes):
  """`(means [C, d], present [C])`: each class's mean feature in the batch
  (zeros for classes it lacks) and 1.0 for the classes it holds."""
  labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
  one_hot = tf.one_hot(labels, num_classes)
  counts = tf.reduce_sum(one_hot, axis=0)
  sums = tf.matmul(one_hot, features, transpose_a=True)
  return sums / tf.maximum(counts, 1.0)[:, None], tf.cast(
      counts > 0, tf.float32
  )


def calibration_step(state: AnchorState, model) -> AnchorState:
  """One Adam step on h with mean_c CE(h(A_c), c) if `state.calibrate`
  (the variables and moments unchanged otherwise)."""
  variables = model.classifier_variables
  anchors = state.anchors
  with tf.GradientTape() as tape:
    logits = model.classify(anchors)
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.range(tf.shape(anchors)[0]), logits
        )
    )
  gradients = tape.gradient(loss, variables)
  steps = state.adam_steps + 1.0
  on = state.calibrate > 0
  new_m, new_v = [], []
  for v, g, m_old, v_old in zip(
      variables, gradients, state.adam_m, state.adam_v
  ):
    m = ADAM_BETA1 * m_old + (1.0 - ADAM_BETA1) * g
    s = ADAM_BETA2 * v_old + (1.0 - ADAM_BETA2) * tf.square(g)
    step = (
        ADAM_RATE
        * (m / (1.0 - ADAM_BETA1**steps))
        / (tf.sqrt(s / (1.0 - ADAM_BETA2**steps)) + ADAM_EPSILON)
    )
    v.assign_sub(state.calibrate * step)
    new_m.append(tf.where(on, m, m_old))
    new_v.append(tf.where(on, s, v_old))
  return state._replace(
      adam_m=tuple(new_m),
      adam_v=tuple(new_v),
      adam_steps=tf.where(on, steps, state.adam_steps),
  )


class FedFa(algorithm.ClientStateAlgorithm):
  """FedFA's math: the server's vector is (A, the round's examples); clients
  keep no state; the client step is a `step_hooks.FeatureStep`."""

  name = 'fedfa'
  keeps_client_state = False

  def __init__(
      self,
      anchor_lambda: float,
      anchor_momentum: float,
      calibration_start_round: int,
  ):
    """Initializes with the hyperparameters.

    Args:
      anchor_lambda: lambda >= 0, the anchor loss's weight.
      anchor_momentum: m in [0, 1], the anchors' momentum.
      calibration_start_round: S >= 1, the first round that calibrates.

    Raises:
      ValueError: naming `fedfa_lambda`, `fedfa_momentum` or
        `fedfa_calibration_start_round` if out of range.
    """
    self._lambda = checks.check_number('fedfa_lambda', anchor_lambda, minimum=0)
    self._momentum = checks.check_number(
        'fedfa_momentum', anchor_momentum, minimum=0, maximum=1
    )
    self._calibration_start = checks.check_int(
        'fedfa_calibration_start_round', calibration_start_round, minimum=1
    )

  def initial_server_vector(self, trainable):
    """(A^0, 0.0): A^0 the first C rows of the d x d identity, with d, C from
    the classifier's kernel [d, C] (the second-last trainable weight)."""
    kernel, bias = tf.nest.flatten(trainable)[-2:]
    features, classes = kernel.shape
    if kernel.shape.rank != 2 or bias.shape != [classes] or classes > features:
      raise ValueError(
          'fedfa needs a last layer with a kernel [d, C] and a bias [C], d >= '
          f'C (C anchors from the d x d identity); got {kernel.shape}, '
          f'{bias.shape}.'
      )
    return (tf.eye(classes, features, dtype=kernel.dtype), tf.constant(0.0))

  @property
  def feature_step(self) -> step_hooks.FeatureStep:
    return step_hooks.FeatureStep(
        initial_state=self._initial_state,
        loss=lambda features, labels, state: state.anchor_loss_on
        * anchor_loss(features, labels, state.anchors, self._lambda),
        after_step=self._after_step,
        sent_vector=self._sent_vector,
    )

  def _initial_state(self, server_vector, round_num, model):
    anchors = server_vector[0]
    done = tf.cast(round_num, tf.float32)
    zeros = tuple(tf.zeros_like(v) for v in model.classifier_variables)
    return AnchorState(
        anchors=anchors,
        anchor_loss_on=tf.cast(done > 0, tf.float32),
        calibrate=tf.cast(done + 1.0 >= self._calibration_start, tf.float32),
        adam_m=zeros,
        adam_v=zeros,
        adam_steps=tf.constant(0.0),
        feature_sums=tf.zeros_like(anchors),
        seen=tf.zeros_like(anchors[:, 0]),
        num_batches=tf.constant(0.0),
    )

  def _after_step(self, state, model, features, labels):
    means, present = class_feature_means(
        features, labels, tf.shape(state.anchors)[0]
    )
    state = calibration_step(state, model)
    return state._replace(
        feature_sums=state.feature_sums + means,
        seen=tf.maximum(state.seen, present),
        num_batches=state.num_batches + 1.0,
    )

  def _sent_vector(self, state, server_vector, num_examples):
    """(n_i A_i, n_i)."""
    del server_vector  # The anchors are in the state.
    m = self._momentum
    moved = m * state.anchors + (1.0 - m) * state.feature_sums / tf.maximum(
        state.num_batches, 1.0
    )
    client_anchors = tf.where(state.seen[:, None] > 0, moved, state.anchors)
    examples = tf.cast(num_examples, tf.float32)
    return (examples * client_anchors, examples)

  def new_client_vector(self, r: algorithm.ClientRound):
    """Not called: the feature step's `sent_vector` gives the vector."""
    raise NotImplementedError("fedfa sends its feature step's anchors.")

  def server_update(self, r: algorithm.ServerRound):
    """`x + lr_g mean(dy)`; A+ = sum n_i A_i / sum n_i (A kept without
    examples)."""
    new_trainable = algorithm.sgd_step(
        r.trainable, r.mean_model_delta, r.server_learning_rate
    )
    weighted, examples = r.vector_delta_sum[0], r.vector_delta_sum[1]
    anchors = tf.where(
        examples > 0, weighted / tf.maximum(examples, 1.0), r.server_vector[0]
    )
    return new_trainable, (anchors, examples)


def build_fedfa(
    model_fn,
    *,
    anchor_lambda: float,
    anchor_momentum: float,
    calibration_start_round: int,
    **process_args,
) -> tff.learning.templates.LearningProcess:
  """Builds FedFA (Zhou et al. 2023, as the IMA authors run it) for TFF.

  `client_state.build_client_state_process(model_fn, FedFa(...),
  **process_args)`: a `tff.learning.templates.LearningProcess` (no client
  states); `model_fn` must build a `step_hooks.HasFeatures` model (a
  task's `feature_model_fn`).

  Raises:
    ValueError: naming a hyperparameter out of range (`FedFa`), or those of
      `build_client_state_process`.
  """
  return process.build_client_state_process(
      model_fn,
      FedFa(anchor_lambda, anchor_momentum, calibration_start_round),
      **process_args,
  )
