"""Tests for tff_fedwin.experiments.worker_flags.resolve: what `auto`
becomes for each kind of `--workers`."""

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
