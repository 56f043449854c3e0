"""The test clients of a task's test set, and each client's evaluation sums.

LEAF evaluates a model on each test user's data and reports the spread over
users, not only the pooled figure. A task whose test set has clients gives
`TestClients`: the client of each test example, in the test set's order.
`TestSetEvaluator` then keeps each example's sums (its loss summed over its
scored positions, those positions, its correct predictions, its positions
counted for the accuracy) and `client_sums` adds them up per client. The
training loop turns them into per-client rows and statistics
(`tff_fedwin.training.client_metrics`; docs/design.md sec. 5.7).
"""

from collections.abc import Sequence

import attrs
import numpy as np

from tff_fedwin import errors


class PerClientEvaluationError(errors.InputError):
  """`--eval_per_client` cannot be done for this task or test set."""


@attrs.frozen(eq=False)
class TestClients:
  """Which test client each test example belongs to.

  Attributes:
    client_ids: The test clients, each with at least one test example.
    example_client: int64 `[num_test_examples]`: for each example of the
      task's `test_data`, in order, its index into `client_ids`.
  """

  client_ids: tuple[str, ...]
  example_client: np.ndarray = attrs.field(
      converter=lambda a: np.asarray(a, np.int64)
  )

  @classmethod
  def from_counts(
      cls, client_ids: Sequence[str], counts: Sequence[int]
  ) -> 'TestClients':
    """Clients whose examples are contiguous, `counts[i]` of `client_ids[i]`.

    Clients with no examples are left out.
    """
    kept = [(c, int(n)) for c, n in zip(client_ids, counts) if n > 0]
    return cls(
        tuple(c for c, _ in kept),
        np.repeat(np.arange(len(kept)), [n for _, n in kept]),
    )

  def num_examples(self) -> np.ndarray:
    """int64 `[num_clients]`: each client's test examples."""
    return np.bincount(self.example_client, minlength=len(self.client_ids))


def check_num_examples(clients: TestClients, num_examples: int) -> None:
  """PerClientEvaluationError unless `clients` lists `num_examples`."""
  if num_examples != clients.example_client.shape[0]:
    raise PerClientEvaluationError(
        f'The test set has {num_examples} examples but its test clients list '
        f'{clients.example_client.shape[0]}.'
    )


def client_sums(clients: TestClients, example_sums: np.ndarray) -> np.ndarray:
  """float64 `[num_clients, num_models, 4]`: the example sums per client.

  Args:
    clients: The test set's `TestClients`.
    example_sums: `[num_examples, num_models, 4]` in the test set's order.

  Raises:
    PerClientEvaluationError: If the test set has another number of examples
      than `clients` lists.
  """
  example_sums = np.asarray(example_sums, np.float64)
  check_num_examples(clients, example_sums.shape[0])
  sums = np.zeros((len(clients.client_ids), *example_sums.shape[1:]))
  np.add.at(sums, clients.example_client, example_sums)
  return sums
