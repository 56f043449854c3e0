"""`TestSetEvaluator`: loss and accuracy of several models in one test pass.

The loop evaluates the window model and the global model (and, with several
windows, one model per window) on the same centralized test set each eval round.
`TestSetEvaluator.evaluate_all` reads the test set once for all of them: one
traced call per evaluation, the batches looped over in the graph, every model's
forward pass on each batch, per-batch sums accumulated in float64 in the
batches' order. A model's numbers are those of evaluating it alone, batch by
batch (results/performance_history.md sec. 8 has the measurements).
"""

import collections
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.tasks import per_client

# Per-batch sums: loss x examples, examples, correct, scored positions.
_NUM_SUMS = 4


def _stack_runs(batches: Sequence[Any]) -> tuple[Any, ...]:
  """Consecutive batches of equal shapes, each run stacked on a new axis 0.

  A test set batched by B is one run of full batches and one run of the
  short last batch; the runs keep the batches' order. Each run is one loop
  in the traced graph, so a test set whose batch shape changes at every batch
  (e.g. sequences padded per batch) traces one forward pass per batch and
  model: pad such a test set to a few shapes.
  """
  runs, current, current_shapes = [], [], None
  for batch in batches:
    shapes = [tuple(t.shape) for t in tf.nest.flatten(batch)]
    if current and shapes != current_shapes:
      runs.append(current)
      current = []
    current.append(batch)
    current_shapes = shapes
  if current:
    runs.append(current)
  return tuple(
      tf.nest.map_structure(lambda *ts: tf.stack(ts), *run) for run in runs
  )


class _Scored(NamedTuple):
  """One model's forward pass on one batch, with what the sums count."""

  output: Any  # The model's `forward_pass` output: predictions are logits.
  labels: tf.Tensor  # int64, the predictions' shape without the classes.
  hits: tf.Tensor  # Whether the arg-max is the label.
  counted: tf.Tensor  # Positions the accuracy counts (pad, excluded out).
  scored: tf.Tensor  # Positions the loss scores (pad out).


def _score(
    model: tff.learning.models.VariableModel,
    batch: Any,
    pad_label: Optional[int],
    excluded_labels: tuple[int, ...] = (),
) -> _Scored:
  output = model.forward_pass(batch, training=False)
  # Test batches are built by this package's tasks: `y` or index 1.
  # (tasks -> losses is not an edge of the import graph, docs sec. 4.)
  labels = batch['y'] if isinstance(batch, dict) else batch[1]
  labels = tf.cast(
      tf.reshape(labels, tf.shape(output.predictions)[:-1]), tf.int64
  )
  hits = tf.equal(tf.argmax(output.predictions, axis=-1), labels)
  scored = (
      tf.ones_like(hits)
      if pad_label is None
      else tf.not_equal(labels, pad_label)
  )
  counted = scored
  for label in excluded_labels:  # Left out of the accuracy only.
    counted = tf.logical_and(counted, tf.not_equal(labels, label))
  return _Scored(output, labels, hits, counted, scored)


def _batch_sums(scored: _Scored) -> tf.Tensor:
  """float64 [4]: loss x n, n, correct, counted positions of one batch."""
  n = tf.cast(scored.output.num_examples, tf.float64)
  return tf.stack(
      [
          tf.cast(scored.output.loss, tf.float64) * n,
          n,
          tf.reduce_sum(
              tf.cast(tf.logical_and(scored.hits, scored.counted), tf.float64)
          ),
          tf.reduce_sum(tf.cast(scored.counted, tf.float64)),
      ]
  )


def _example_sums(scored: _Scored) -> tf.Tensor:
  """float64 [B, 4]: each example's `per_client` sums (LOSS, SCORED, ...).

  The loss is the softmax cross-entropy of the logits (every task's loss,
  `Task.model_fn`) summed over the example's scored positions.
  """
  ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=scored.labels, logits=scored.output.predictions
  )
  batch = tf.shape(scored.labels)[0]

  def per_example(t):
    return tf.reduce_sum(tf.reshape(tf.cast(t, tf.float64), [batch, -1]), 1)

  weights = tf.cast(scored.scored, ce.dtype)
  return tf.stack(
      [
          per_example(ce * weights),
          per_example(scored.scored),
          per_example(tf.logical_and(scored.hits, scored.counted)),
          per_example(scored.counted),
      ],
      axis=1,
  )


def _metrics(sums: Sequence[float]) -> 'collections.OrderedDict[str, float]':
  loss_sum, num_examples, correct, counted = sums
  return collections.OrderedDict(
      loss=loss_sum / num_examples if num_examples else 0.0,
      accuracy=correct / counted if counted else 0.0,
  )


class TestSetEvaluator:
  """`ModelWeights -> {'loss', 'accuracy'}` on a batched test set.

  `loss` is the model's own loss (plain cross-entropy) averaged over test
  examples; `accuracy` is the fraction of argmax predictions equal to the
  label, ignoring `pad_label` positions of sequence tasks and, for the
  accuracy only, those labelled one of `accuracy_excluded_labels`. Runs the TFF
  model's forward pass in this process (no TFF call). The test batches are
  materialized once, at construction.

  Calling it evaluates one model; `evaluate_all` evaluates several in one
  pass over the test set (the loop uses it, `training.metrics`). It keeps one
  TFF model per model evaluated at once, built by `model_fn` when first
  needed. With `test_clients` (`per_client.TestClients`), the same pass also
  gives each test client's sums (`evaluate_all_per_client`).
  """

  def __init__(
      self,
      model_fn: Callable[[], tff.learning.models.VariableModel],
      test_data: tf.data.Dataset,
      pad_label: Optional[int] = None,
      *,
      accuracy_excluded_labels: Sequence[int] = (),
      test_clients: Optional[per_client.TestClients] = None,
  ):
    self._model_fn = model_fn
    self._pad_label = pad_label
    self._excluded = tuple(int(label) for label in accuracy_excluded_labels)
    self._runs = _stack_runs(list(test_data))
    self.test_clients = test_clients
    if test_clients is not None:
      leaves = [tf.nest.flatten(run)[0] for run in self._runs]
      per_client.check_num_examples(
          test_clients, sum(int(t.shape[0]) * int(t.shape[1]) for t in leaves)
      )
    self._models = []
    self._passes = {}

  def __call__(
      self, model_weights: Any
  ) -> 'collections.OrderedDict[str, float]':
    return self.evaluate_all([model_weights])[0]

  def evaluate_all(
      self, model_weights: Sequence[Any]
  ) -> list['collections.OrderedDict[str, float]']:
    """The metrics of each of `model_weights` (`ModelWeights`), in order."""
    return self.evaluate_all_per_client(model_weights)[0]

  def evaluate_all_per_client(
      self, model_weights: Sequence[Any]
  ) -> tuple[list['collections.OrderedDict[str, float]'], Optional[np.ndarray]]:
    """`evaluate_all`'s metrics and the per-client sums (None without clients).

    The sums are float64 `[num_clients, len(model_weights), 4]`
    (`per_client.client_sums`).
    """
    count = len(model_weights)
    if not count:
      return [], None
    while len(self._models) < count:
      self._models.append(self._model_fn())
    for weights, model in zip(model_weights, self._models):
      weights.assign_weights_to(model)
    if count not in self._passes:
      self._passes[count] = self._build_pass(self._models[:count])
    totals, examples = self._passes[count](self._runs)
    metrics = [_metrics(row) for row in totals.numpy().tolist()]
    if self.test_clients is None:
      return metrics, None
    return metrics, per_client.client_sums(self.test_clients, examples.numpy())

  def _build_pass(self, models):
    """A `tf.function`: stacked runs -> (float64 [len(models), 4] sums,
    float64 [examples, len(models), 4] example sums, or [0, ...] without
    `test_clients`)."""
    pad_label, excluded = self._pad_label, self._excluded
    keep_examples = self.test_clients is not None

    @tf.function
    def test_pass(runs):
      totals = tf.zeros([len(models), _NUM_SUMS], tf.float64)
      examples = tf.TensorArray(
          tf.float64, size=0, dynamic_size=True, infer_shape=False
      )
      for run in runs:
        for i in tf.range(tf.shape(tf.nest.flatten(run)[0])[0]):
          batch = tf.nest.map_structure(lambda t, i=i: t[i], run)
          scored = [_score(m, batch, pad_label, excluded) for m in models]
          totals += tf.stack([_batch_sums(s) for s in scored])
          if keep_examples:
            examples = examples.write(
                examples.size(),
                tf.stack([_example_sums(s) for s in scored], axis=1),
            )
      if keep_examples:
        return totals, examples.concat()
      return totals, tf.zeros([0, len(models), _NUM_SUMS], tf.float64)

    return test_pass
