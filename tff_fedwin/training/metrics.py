"""A round's metrics row: flattened training metrics and the two evaluations."""

import collections
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tff_fedwin.training import outputs
from tff_fedwin.training import runner as runner_lib

EvaluateFn = Callable[[runner_lib.ModelWeights], Mapping[str, float]]


def flatten_scalar_metrics(
    metrics: Any, prefix: str = ''
) -> 'collections.OrderedDict[str, Any]':
  """The numeric scalars of a nested metrics structure, keyed `a/b/c`.

  Mappings, named tuples, lists and tuples are walked (sequence positions
  become path components); non-numeric or non-scalar leaves are dropped; bools
  become ints.

  Args:
    metrics: A nested structure, e.g. the metrics of `process.next`.
    prefix: Prepended to every key as `prefix/...` (if non-empty).

  Returns:
    An `OrderedDict` of Python ints and floats.
  """
  flat = collections.OrderedDict()

  def walk(value, path):
    if isinstance(value, Mapping):
      items = value.items()
    elif isinstance(value, tuple) and hasattr(value, '_asdict'):
      items = value._asdict().items()
    elif isinstance(value, (list, tuple)):
      items = enumerate(value)
    else:
      array = np.asarray(value)
      if array.ndim == 0 and array.dtype.kind in 'biuf':
        key = '/'.join(path)
        flat[key] = float(array) if array.dtype.kind == 'f' else int(array)
      return
    for name, child in items:
      walk(child, path + [str(name)])

  walk(metrics, [prefix] if prefix else [])
  return flat


def check_eval_metrics(metrics: Any) -> 'collections.OrderedDict[str, float]':
  """`evaluate_fn`'s result as floats; ValueError unless named scalars."""
  if not isinstance(metrics, Mapping) or not metrics:
    raise ValueError(
        '`evaluate_fn` must return a non-empty mapping of metric names to '
        f'floats, got {metrics!r}.'
    )
  checked = collections.OrderedDict()
  for name, value in metrics.items():
    if not isinstance(name, str) or not name or '/' in name:
      raise ValueError(
          '`evaluate_fn` must return str metric names without "/", got '
          f'{name!r}.'
      )
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in 'biuf':
      raise ValueError(
          f'`evaluate_fn` returned a non-scalar metric {name!r}: {value!r}.'
      )
    checked[name] = float(array)
  return checked


def same_weights(
    a: runner_lib.ModelWeights, b: runner_lib.ModelWeights
) -> bool:
  """Whether two models have equal leaves (the window model is w^t)."""
  leaves_a = tf.nest.flatten((a.trainable, a.non_trainable))
  leaves_b = tf.nest.flatten((b.trainable, b.non_trainable))
  return len(leaves_a) == len(leaves_b) and all(
      np.array_equal(np.asarray(x), np.asarray(y))
      for x, y in zip(leaves_a, leaves_b)
  )


def evaluate_all(
    evaluate_fn: EvaluateFn, model_weights: Sequence[runner_lib.ModelWeights]
) -> list['collections.OrderedDict[str, float]']:
  """`evaluate_fn` of each model, checked; one pass when it can.

  An `evaluate_fn` with an `evaluate_all(sequence of ModelWeights)` method
  (e.g. `tasks.TestSetEvaluator`) evaluates them all in one call; any other
  is called once per model.
  """
  many = getattr(evaluate_fn, 'evaluate_all', None)
  if many is None:
    results = [evaluate_fn(weights) for weights in model_weights]
  else:
    results = list(many(list(model_weights)))
    if len(results) != len(model_weights):
      raise ValueError(
          '`evaluate_fn.evaluate_all` must return one mapping per model: got '
          f'{len(results)} for {len(model_weights)} models.'
      )
  return [check_eval_metrics(metrics) for metrics in results]


def evaluate_models(
    runner: runner_lib.RoundRunner,
    state: Any,
    evaluate_fn: EvaluateFn,
) -> 'collections.OrderedDict[str, float]':
  """`window/<m>`, `global/<m>` and `eval_time_seconds` of a server state.

  A runner with `extra_window_models(state)` (name -> `ModelWeights`, e.g.
  `window_50`) adds `<name>/<m>` for each. All models are evaluated in one
  `evaluate_all`, each distinct model once (an inactive window model is the
  global model).
  """
  start = time.monotonic()
  named = [
      (outputs.WINDOW_PREFIX, runner.window_model_weights(state)),
      (outputs.GLOBAL_PREFIX, runner.global_model_weights(state)),
  ]
  extra = getattr(runner, 'extra_window_models', None)
  if extra is not None:
    named.extend(extra(state).items())
  distinct, index_of = [], []
  for _, weights in named:
    same = [i for i, d in enumerate(distinct) if same_weights(d, weights)]
    if not same:
      distinct.append(weights)
    index_of.append(same[0] if same else len(distinct) - 1)
  results = evaluate_all(evaluate_fn, distinct)
  values = collections.OrderedDict()
  for (prefix, _), index in zip(named, index_of):
    for name, value in results[index].items():
      values[f'{prefix}/{name}'] = value
  values[outputs.EVAL_TIME_KEY] = time.monotonic() - start
  return values
