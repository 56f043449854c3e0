"""Tests for tff_fedwin.experiments.config.client_state_transfer: what
`--client_state_transfer=auto` becomes for each kind of `--workers`."""

import pytest

from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib


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
def test_client_state_transfer_resolves_auto_by_the_workers(
    workers, transfer, expected
):
  config = experiments.ExperimentConfig(
      algorithm='scaffold', workers=workers, client_state_transfer=transfer
  )
  assert config_lib.client_state_transfer(config) == expected
