"""Tests for tff_fedwin.experiments.context: `execution_context` (the
`--workers` syntax: tests/experiments/worker_flags_test.py).

For `execution_context`, the runtime's context managers are replaced by
recorders: which one `--workers` and `--worker_bind` choose, with which
arguments (starting workers is tested in tests/runtime/).
"""

import pytest

from tff_fedwin.experiments import context


@pytest.fixture
def recorded(monkeypatch):
  calls = []

  def recorder(name):
    def record(**kwargs):
      calls.append((name, kwargs))
      return name

    return record

  for name in ('local_execution_context', 'multi_worker_execution_context'):
    monkeypatch.setattr(context.runtime, name, recorder(name))
  return calls


@pytest.mark.parametrize(
    'workers, worker_bind, expected',
    [
        ('', 'loopback', ('local_execution_context', dict(loopback_only=True))),
        (' ', 'all', ('local_execution_context', dict(loopback_only=False))),
        (
            '3',
            'loopback',
            (
                'multi_worker_execution_context',
                dict(num_workers=3, loopback_only=True),
            ),
        ),
        (
            '2',
            'all',
            (
                'multi_worker_execution_context',
                dict(num_workers=2, loopback_only=False),
            ),
        ),
        (
            'a:1,b:2',
            'loopback',
            ('multi_worker_execution_context', dict(addresses=('a:1', 'b:2'))),
        ),
    ],
)
def test_execution_context_of_the_workers_flag(
    recorded, workers, worker_bind, expected
):
  chosen = context.execution_context(workers, worker_bind)

  assert recorded == [expected]
  assert chosen == expected[0]


def test_execution_context_rejects_bad_workers(recorded):
  with pytest.raises(ValueError, match='--workers'):
    context.execution_context('0')
  assert not recorded
