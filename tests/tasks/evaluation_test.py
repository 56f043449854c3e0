"""`TestSetEvaluator` against numpy: several models, one pass, any batching.

Expected values are computed in numpy from each model's logits on the whole
test set: loss = mean over examples of logsumexp(z) - z[y]; accuracy = the
fraction of scored examples (label != pad_label) with argmax(z) = y.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.tasks import evaluation
from tff_fedwin.tasks import registry

_FEATURES, _CLASSES = 6, 3


def _keras_model(seed):
  return registry.create_mnist_cnn((_FEATURES,), _CLASSES, seed=seed)  # MLP


def _weights(seed):
  model = _keras_model(seed)
  return tff.learning.models.ModelWeights(
      trainable=[w.numpy() for w in model.trainable_weights],
      non_trainable=[w.numpy() for w in model.non_trainable_weights],
  )


def _expected(seed, x, y, pad_label):
  logits = _keras_model(seed)(x).numpy().astype(np.float64)
  top = logits.max(axis=1)
  logsumexp = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
  scored = y != pad_label if pad_label is not None else np.ones_like(y, bool)
  hits = (logits.argmax(axis=1) == y) & scored
  return np.mean(logsumexp - logits[np.arange(len(y)), y]), hits.sum() / (
      scored.sum()
  )


def _test_set(batch_sizes, as_tuple, seed=0):
  """Examples batched by `batch_sizes` in order, as dicts or (x, y)."""
  rng = np.random.default_rng(seed)
  n = sum(batch_sizes)
  x = rng.normal(size=(n, _FEATURES)).astype(np.float32)
  y = rng.integers(0, _CLASSES, n).astype(np.int32)
  ends = np.cumsum(batch_sizes)
  batches = [(x[e - b : e], y[e - b : e]) for b, e in zip(batch_sizes, ends)]
  if as_tuple:
    elements = batches
  else:
    elements = [collections.OrderedDict(x=bx, y=by) for bx, by in batches]
  dataset = tf.data.Dataset.from_generator(
      lambda: iter(elements),
      output_signature=tf.nest.map_structure(
          lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), elements[0]
      ),
  )
  return dataset, x, y


def _model_fn(as_tuple):
  spec = (
      tf.TensorSpec([None, _FEATURES], tf.float32),
      tf.TensorSpec([None], tf.int32),
  )
  if not as_tuple:
    spec = collections.OrderedDict(x=spec[0], y=spec[1])
  return lambda: tff.learning.models.from_keras_model(
      _keras_model(0),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=spec,
  )


@pytest.mark.parametrize(
    'batch_sizes',
    [
        [1000, 1000, 300],  # A test set batched by 1,000: two runs.
        [7, 7, 3, 7, 7, 1],  # Shapes change mid-set: four runs, in order.
        [5],
    ],
)
@pytest.mark.parametrize('as_tuple', [False, True])
@pytest.mark.parametrize('pad_label', [None, 2])
def test_evaluate_all_is_each_models_numpy_metrics(
    batch_sizes, as_tuple, pad_label
):
  dataset, x, y = _test_set(batch_sizes, as_tuple)
  evaluator = evaluation.TestSetEvaluator(
      _model_fn(as_tuple), dataset, pad_label
  )
  seeds = [3, 4, 3, 5]  # A repeated model gets the same numbers.

  results = evaluator.evaluate_all([_weights(s) for s in seeds])

  assert len(results) == len(seeds)
  for seed, metrics in zip(seeds, results):
    loss, accuracy = _expected(seed, x, y, pad_label)
    assert list(metrics) == ['loss', 'accuracy']
    assert metrics['loss'] == pytest.approx(loss, rel=1e-5)
    assert metrics['accuracy'] == pytest.approx(accuracy, abs=1e-12)


def test_one_pass_gives_each_models_own_numbers_exactly():
  # Models evaluated together, alone, in another order or count: the same
  # float64 sums in the same batch order, so equal to the last bit.
  dataset, _, _ = _test_set([1000, 1000, 300], as_tuple=False)
  evaluator = evaluation.TestSetEvaluator(_model_fn(False), dataset)
  weights = {s: _weights(s) for s in (3, 4, 5)}

  together = evaluator.evaluate_all([weights[3], weights[4], weights[5]])
  alone = [evaluator(weights[s]) for s in (3, 4, 5)]
  reordered = evaluator.evaluate_all([weights[5], weights[3]])

  assert together == alone
  assert reordered == [alone[2], alone[0]]


def test_evaluate_all_of_no_models_is_empty():
  dataset, _, _ = _test_set([4], as_tuple=False)
  evaluator = evaluation.TestSetEvaluator(_model_fn(False), dataset)
  assert evaluator.evaluate_all([]) == []
