"""Tests for tff_fedwin.experiments.worker_flags: `parse_workers` (the
`--workers` syntax) and `resolve` (what `auto` becomes for each kind of
`--workers`)."""

import pytest

from tff_fedwin import experiments
from tff_fedwin.experiments import worker_flags


@pytest.mark.parametrize(
    'workers, transfer, expected',
    [
        # auto: files with the workers this run starts (same machine) ...
        ('', 'auto', 'files'),
        ('2', 'auto', 'files'),
        # ... values with running ones, which may be on other machines.
        ('localhost:8000', 'auto', 'values'),
        ('localhost:8000', 'files', 'files'),  # The user says they share.
        ('', 'values', 'values'),
    ],
)
@pytest.mark.parametrize(
    'flag',
    ['client_state_transfer', 'server_state_transfer', 'client_data_transfer'],
)
def test_transfer_resolves_auto_by_the_workers(
    flag, workers, transfer, expected
):
  config = experiments.ExperimentConfig(
      algorithm='scaffold', workers=workers, **{flag: transfer}
  )
  assert worker_flags.resolve(config, flag) == expected


@pytest.mark.parametrize(
    'workers, expected',
    [
        ('', (None, ())),
        ('   ', (None, ())),
        ('3', (3, ())),
        (' 12 ', (12, ())),
        ('a:1,b:2', (None, ('a:1', 'b:2'))),
        ('a:1 , b:2', (None, ('a:1', 'b:2'))),
        ('[::1]:8000', (None, ('[::1]:8000',))),
        (
            '10.0.0.2:1,host-b.example:65535',
            (None, ('10.0.0.2:1', 'host-b.example:65535')),
        ),
    ],
)
def test_parse_workers(workers, expected):
  assert worker_flags.parse_workers(workers) == expected


@pytest.mark.parametrize(
    'workers',
    [
        '0',
        '00',
        '-1',
        '1.5',
        'a',
        'a:',
        ':1',
        'a:1,',
        'a:1,b',
        'a:x',
        'a:1:',
        'a:0',
        'a:65536',
        'a:99999',
        'a b:1',
        'a/b:1',
        '[::1:8000',
        'a:-1',
    ],
)
def test_parse_workers_rejects(workers):
  with pytest.raises(ValueError, match='--workers'):
    worker_flags.parse_workers(workers)
