"""Tests for tff_fedwin.experiments.config: the edges of what the checks allow.

Each case is a value at the edge of what is allowed next to the first value
past it, both applied to the valid `BASE`; the error must name the flag(s).
"""

import attrs
import pytest

from tests.experiments import config_fixtures
from tff_fedwin import experiments

BASE = config_fixtures.BASE


def _edge(name, flags, accepted, rejected, **common):
  return pytest.param(
      dict(common, **accepted), dict(common, **rejected), flags, id=name
  )


# A value at the edge of what is allowed next to the first value past it.
EDGES = [
    _edge(
        'window_start_round_at_total_rounds',
        ['--window_start_round', '--total_rounds'],
        dict(window_start_round=10),
        dict(window_start_round=11),
        window_size=2,
    ),
    _edge(
        'window_size_at_total_rounds',
        ['--window_size', '--total_rounds'],
        dict(window_size=10),
        dict(window_size=11),
    ),
    _edge(
        'clients_per_round_at_num_clients',
        ['--clients_per_round', '--num_clients'],
        dict(clients_per_round=10),
        dict(clients_per_round=11),
    ),
    _edge(
        'window_size_zero',
        ['--window_size'],
        dict(window_size=0),
        dict(window_size=-1),
    ),
    _edge('seed_zero', ['--seed'], dict(seed=0), dict(seed=-1)),
    _edge(
        'total_rounds_one',
        ['--total_rounds'],
        dict(total_rounds=1),
        dict(total_rounds=0),
    ),
    _edge(
        'dirichlet_alpha_zero',
        ['--dirichlet_alpha'],
        dict(dirichlet_alpha=0.0),
        dict(dirichlet_alpha=-1e-9),
    ),
    _edge(
        'proximal_strength_zero',
        ['--proximal_strength'],
        dict(proximal_strength=0.0),
        dict(proximal_strength=-1e-9),
        algorithm='fedprox',
    ),
    _edge(
        'tiny_server_learning_rate',
        ['--server_learning_rate'],
        dict(server_learning_rate=1e-9),
        dict(server_learning_rate=0.0),
    ),
    _edge(
        'read_every_divides_eval_rounds',
        ['--rounds_per_eval', '--window_read_every'],
        dict(rounds_per_eval=4),
        dict(rounds_per_eval=3),
        window_size=4,
        window_read_every=2,
    ),
    _edge(
        'mime_lite_window_server_lr_1',
        ['--server_learning_rate'],
        dict(server_learning_rate=1.0),
        dict(server_learning_rate=0.99),
        algorithm='mime_lite',
        window_size=2,
    ),
    _edge('one_worker', ['--workers'], dict(workers='1'), dict(workers='0')),
    _edge(
        'highest_port',
        ['--workers'],
        dict(workers='host:65535'),
        dict(workers='host:65536'),
    ),
]


@pytest.mark.parametrize('accepted, rejected, flags', EDGES)
def test_validate_config_accepts_the_edge_and_rejects_past_it(
    accepted, rejected, flags
):
  assert experiments.validate_config(attrs.evolve(BASE, **accepted)) is None

  with pytest.raises(ValueError) as raised:
    experiments.validate_config(attrs.evolve(BASE, **rejected))

  for flag in flags:
    assert flag in str(raised.value)
