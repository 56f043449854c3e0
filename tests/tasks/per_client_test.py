"""Per-client sums of `TestSetEvaluator` against numpy on each client's rows.

The test set and models are evaluation_test's (an MLP on 6 features, 3
classes). Examples belong to clients in an interleaved order; the expected
sums are computed in numpy from each model's logits on the examples of one
client: loss = sum over its scored examples of logsumexp(z) - z[y], scored =
label != pad, correct = argmax(z) = y among the counted (scored and not an
excluded label).
"""

import numpy as np
import pytest

from tests.tasks import evaluation_test as fixtures
from tff_fedwin.tasks import evaluation
from tff_fedwin.tasks import per_client


def _numpy_sums(seed, x, y, example_client, num_clients, pad, excluded):
  logits = fixtures._keras_model(seed)(x).numpy().astype(np.float64)
  top = logits.max(axis=1)
  ce = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
  ce -= logits[np.arange(len(y)), y]
  scored = y != pad
  counted = scored & ~np.isin(y, excluded)
  hits = (logits.argmax(axis=1) == y) & counted
  sums = np.zeros([num_clients, 4])
  for c in range(num_clients):
    mine = example_client == c
    sums[c] = [
        ce[mine & scored].sum(),
        (mine & scored).sum(),
        (mine & hits).sum(),
        (mine & counted).sum(),
    ]
  return sums


@pytest.mark.parametrize('pad, excluded', [(None, ()), (2, ()), (None, (1,))])
def test_per_client_sums_are_numpys(pad, excluded):
  batch_sizes = [7, 7, 3, 7, 7, 1]  # Four runs of batch shapes.
  dataset, x, y = fixtures._test_set(batch_sizes, as_tuple=False)
  rng = np.random.default_rng(7)
  example_client = rng.permutation(np.arange(len(y)) % 4)  # Interleaved.
  clients = per_client.TestClients(('d', 'b', 'c', 'a'), example_client)
  evaluator = evaluation.TestSetEvaluator(
      fixtures._model_fn(False),
      dataset,
      pad,
      accuracy_excluded_labels=excluded,
      test_clients=clients,
  )
  seeds = [3, 4]

  metrics, sums = evaluator.evaluate_all_per_client(
      [fixtures._weights(s) for s in seeds]
  )

  assert sums.shape == (4, 2, 4)
  for i, seed in enumerate(seeds):
    expected = _numpy_sums(seed, x, y, example_client, 4, pad, excluded)
    np.testing.assert_allclose(sums[:, i], expected, rtol=1e-5)
    np.testing.assert_array_equal(sums[:, i, 1:], expected[:, 1:])
    # The pooled figures are the plain evaluator's.
    assert metrics[i] == evaluation.TestSetEvaluator(
        fixtures._model_fn(False),
        dataset,
        pad,
        accuracy_excluded_labels=excluded,
    )(fixtures._weights(seed))


def test_test_clients_must_list_every_example():
  dataset, _, y = fixtures._test_set([5, 5], as_tuple=False)
  with pytest.raises(
      per_client.PerClientEvaluationError,
      match='The test set has 10 examples but its test clients list 9',
  ):
    evaluation.TestSetEvaluator(
        fixtures._model_fn(False),
        dataset,
        test_clients=per_client.TestClients.from_counts(['a', 'b'], [4, 5]),
    )


def test_from_counts_leaves_out_clients_without_examples():
  clients = per_client.TestClients.from_counts(['a', 'b', 'c'], [2, 0, 3])
  assert clients.client_ids == ('a', 'c')
  np.testing.assert_array_equal(clients.example_client, [0, 0, 1, 1, 1])
  np.testing.assert_array_equal(clients.num_examples(), [2, 3])
