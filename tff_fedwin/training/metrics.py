"""A round's metrics row: flattened training metrics and the two evaluations."""

import collections
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tff_fedwin.training import client_metrics
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
) -> tuple[list['collections.OrderedDict[str, float]'], Optional[np.ndarray]]:
  """`evaluate_fn` of each model, checked; one pass when it can.

  An `evaluate_fn` with an `evaluate_all(sequence of ModelWeights)` method
  (e.g. `tasks.TestSetEvaluator`) evaluates them all in one call; any other
  is called once per model. One with `test_clients` set and an
  `evaluate_all_per_client` method also gives the per-client sums.

  Returns:
    The metrics of each model and the per-client sums (float64 `[clients,
    models, 4]`, `tasks.per_client.client_sums`) or None.
  """
  sums = None
  if per_client_metrics_of(evaluate_fn):
    results, sums = evaluate_fn.evaluate_all_per_client(list(model_weights))
    results = list(results)
  elif getattr(evaluate_fn, 'evaluate_all', None) is not None:
    results = list(evaluate_fn.evaluate_all(list(model_weights)))
  else:
    results = [evaluate_fn(weights) for weights in model_weights]
  if len(results) != len(model_weights):
    raise ValueError(
        '`evaluate_fn.evaluate_all` must return one mapping per model: got '
        f'{len(results)} for {len(model_weights)} models.'
    )
  return [check_eval_metrics(metrics) for metrics in results], sums


def per_client_metrics_of(evaluate_fn: EvaluateFn) -> bool:
  """Whether `evaluate_fn` evaluates each test client (`--eval_per_client`)."""
  return getattr(evaluate_fn, 'test_clients', None) is not None and callable(
      getattr(evaluate_fn, 'evaluate_all_per_client', None)
  )


def evaluate_models(
    runner: runner_lib.RoundRunner,
    state: Any,
    evaluate_fn: EvaluateFn,
) -> 'collections.OrderedDict[str, float]':
  """`window/<m>`, `global/<m>` and `eval_time_seconds` of a server state.

  `evaluate_models_and_clients`'s metrics.
  """
  return evaluate_models_and_clients(runner, state, evaluate_fn)[0]


def evaluate_models_and_clients(
    runner: runner_lib.RoundRunner,
    state: Any,
    evaluate_fn: EvaluateFn,
) -> tuple[
    'collections.OrderedDict[str, float]', Optional[client_metrics.ClientSums]
]:
  """`window/<m>`, `global/<m>`, `eval_time_seconds`; the per-client sums.

  A runner with `extra_window_models(state)` (name -> `ModelWeights`, e.g.
  `window_50`) adds `<name>/<m>` for each. All models are evaluated in one
  `evaluate_all`, each distinct model once (an inactive window model is the
  global model). With an `evaluate_fn` that evaluates each test client
  (`per_client_metrics_of`), each model's metrics also have
  `client_metrics.summary`'s, and the `ClientSums` are returned (else None).
  """
  start = time.monotonic()
  named = [
      (outputs.WINDOW_PREFIX, runner.window_model_weights(state)),
      (outputs.GLOBAL_PREFIX, runner.global_model_weights(state)),
  ]
  named.extend(runner.extra_window_models(state).items())
  distinct, index_of = [], []
  for _, weights in named:
    same = [i for i, d in enumerate(distinct) if same_weights(d, weights)]
    if not same:
      distinct.append(weights)
    index_of.append(same[0] if same else len(distinct) - 1)
  results, sums = evaluate_all(evaluate_fn, distinct)
  if sums is not None:
    for i, metrics in enumerate(results):
      metrics.update(client_metrics.summary(sums[:, i]))
  values = collections.OrderedDict()
  for (prefix, _), index in zip(named, index_of):
    for name, value in results[index].items():
      values[f'{prefix}/{name}'] = value
  values[outputs.EVAL_TIME_KEY] = time.monotonic() - start
  clients = None
  if sums is not None:
    test_clients = evaluate_fn.test_clients
    clients = client_metrics.ClientSums(
        tuple(test_clients.client_ids),
        np.asarray(test_clients.num_examples()),
        tuple(prefix for prefix, _ in named),
        sums[:, index_of],
    )
  return values, clients
