"""The `build_process` fixture of the SCAFFOLD process tests."""

import pytest

from tests.algorithms.scaffold import scaffold_reference as sref
from tff_fedwin.algorithms import scaffold


@pytest.fixture(scope='module')
def build_process():
  """Builds each process configuration once per module."""
  cache = {}

  def build(server_learning_rate=1.0, with_counter=False, **kwargs):
    key = (server_learning_rate, with_counter, tuple(sorted(kwargs.items())))
    if key not in cache:
      cache[key] = scaffold.build_scaffold(
          lambda: sref.model_fn(with_counter),
          client_learning_rate=sref.CLIENT_LEARNING_RATE,
          server_learning_rate=server_learning_rate,
          total_clients=sref.TOTAL_CLIENTS,
          **kwargs,
      )
    return cache[key]

  return build
