"""What `--eval_per_client` adds to an eval round, beside the pooled one.

`measure` (run in a fresh process by `scripts/benchmark_leaf.py`) builds the
LEAF task of a directory (FEMNIST-shaped: `cnn_dropout`, the test set
batched by 1,000 as `--task=leaf` does) and times, alternately, an eval
round's evaluation of two models (window and global) without and with the
per-client sums: the pooled pass (`TestSetEvaluator.evaluate_all`), and the
pass that also keeps each example's sums, adds them per client, computes the
statistics (`training.client_metrics.summary`) and appends the rows to a
per_client_metrics.csv (`training.per_client_csv.append`). Each is traced
once before the timed repeats.
"""

import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_fedwin.tasks import data_files
from tff_fedwin.tasks import leaf
from tff_fedwin.training import client_metrics
from tff_fedwin.training import per_client_csv


def _two_models(task) -> list[Any]:
  """Two different models: the task's initial one and a perturbed copy."""
  weights = tff.learning.models.ModelWeights.from_model(task.model_fn())
  first = tf.nest.map_structure(np.asarray, weights)
  rng = np.random.default_rng(0)
  second = tf.nest.map_structure(
      lambda a: (a + 0.01 * rng.normal(size=a.shape)).astype(a.dtype), first
  )
  return [first, second]


def measure(data_dir: str, cache_dir: str, repeats: int) -> dict[str, Any]:
  """Median seconds of an eval round pooled and per client (module doc)."""
  task = leaf.leaf_task(
      data_dir,
      batch_size=20,
      epochs=1,
      seed=0,
      cache_dir=data_files.leaf_cache_dir(cache_dir),  # As `--cache_dir`.
  )
  models = _two_models(task)
  pooled = task.build_evaluate_fn()
  per_client = task.build_evaluate_fn(per_client_metrics=True)
  clients = task.test_clients
  rows_path = os.path.join(tempfile.mkdtemp(), 'per_client_metrics.csv')

  def per_client_round(round_num):
    _, sums = per_client.evaluate_all_per_client(models)
    for i in range(len(models)):
      client_metrics.summary(sums[:, i])
    per_client_csv.append(
        rows_path,
        round_num,
        client_metrics.ClientSums(
            clients.client_ids,
            clients.num_examples(),
            ('window', 'global'),
            sums,
        ),
    )

  pooled.evaluate_all(models)  # Traced once each.
  per_client_round(0)
  times = {'pooled': [], 'per_client': []}
  for round_num in range(1, repeats + 1):
    for name, step in (
        ('pooled', lambda: pooled.evaluate_all(models)),
        ('per_client', lambda r=round_num: per_client_round(r)),
    ):
      started = time.perf_counter()
      step()
      times[name].append(time.perf_counter() - started)
  return {
      'num_test_clients': len(clients.client_ids),
      'num_test_examples': int(clients.example_client.shape[0]),
      'pooled_seconds': statistics.median(times['pooled']),
      'per_client_seconds': statistics.median(times['per_client']),
      'pooled_all': times['pooled'],
      'per_client_all': times['per_client'],
      'rows_bytes_per_round': os.path.getsize(rows_path) // (repeats + 1),
  }
