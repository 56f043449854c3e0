"""Each test client's loss and accuracy, and their spread over the clients.

With an `evaluate_fn` that evaluates each test client (`--eval_per_client`,
`tasks.TestSetEvaluator` built with `test_clients`), the loop gets, per eval
round and evaluated model, each test client's four sums: its loss summed over
its scored positions, those positions, its correct predictions and the
positions its accuracy counts (the layout of `tff_fedwin.tasks.per_client`;
a sequence task's positions are its non-pad targets, a one-label task's its
examples). From them (docs/design.md sec. 5.7):

* a client's loss is its loss sum over its scored positions, its accuracy
  its correct predictions over its counted positions; a client with no
  counted position (e.g. only OOV targets) has no accuracy (NaN: an empty
  cell in per_client_metrics.csv, left out of the statistics);
* `client_accuracy_weighted`: the correct predictions over the counted
  positions, summed over the clients: the pooled accuracy (the same integers
  added in another order);
* `client_accuracy_mean`, `client_loss_mean`: unweighted means over clients;
* `client_accuracy_p10`, `_p50`, `_p90`: percentiles of the clients'
  accuracies (numpy's default, linear interpolation).
"""

import collections
from typing import NamedTuple

import numpy as np

# The sums' layout (`tff_fedwin.tasks.per_client`).
LOSS, SCORED, CORRECT, COUNTED = range(4)
PERCENTILES = (10, 50, 90)


class ClientSums(NamedTuple):
  """Each test client's sums for each evaluated model of one eval round."""

  client_ids: tuple[str, ...]
  num_examples: np.ndarray  # int64 [clients]: their test examples.
  prefixes: tuple[str, ...]  # `window`, `global`, extra windows' names.
  sums: np.ndarray  # float64 [clients, len(prefixes), 4].


def client_loss_and_accuracy(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(loss, accuracy) of `[..., 4]` sums; NaN where there is nothing to score."""
  with np.errstate(invalid='ignore', divide='ignore'):
    loss = np.where(
        sums[..., SCORED] > 0, sums[..., LOSS] / sums[..., SCORED], np.nan
    )
    accuracy = np.where(
        sums[..., COUNTED] > 0, sums[..., CORRECT] / sums[..., COUNTED], np.nan
    )
  return loss, accuracy


def summary(sums: np.ndarray) -> 'collections.OrderedDict[str, float]':
  """The statistics over the clients of one model's `[clients, 4]` sums."""
  loss, accuracy = client_loss_and_accuracy(sums)
  loss, accuracy = loss[~np.isnan(loss)], accuracy[~np.isnan(accuracy)]
  counted = float(np.sum(sums[:, COUNTED]))
  values = collections.OrderedDict(
      client_loss_mean=float(np.mean(loss)) if loss.size else 0.0,
      client_accuracy_weighted=(
          float(np.sum(sums[:, CORRECT])) / counted if counted else 0.0
      ),
      client_accuracy_mean=float(np.mean(accuracy)) if accuracy.size else 0.0,
  )
  for q in PERCENTILES:
    values[f'client_accuracy_p{q}'] = (
        float(np.percentile(accuracy, q)) if accuracy.size else 0.0
    )
  return values
