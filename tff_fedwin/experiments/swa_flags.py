"""The server-side SWA flags and how they fit the run.

`--swa_start_round` t_s (0: no SWA) and `--swa_cycle` c wrap the run's runner
in `tff_fedwin.algorithms.SwaRunner` (FedSWA, WiMA's comparison; docs/
design.md, "Server-side SWA (WiMA's comparison)"); `--client_lr_schedule=
swa_cyclic` is FedSWA's cyclic client rate from t_s on, with the same c
(the authors' one `--swa-c` sets both the rate's cycle and the averaging
period: a second flag would have to agree with it). Checked before any TFF
work, every misfit reported, each naming its flags. `config` is an
`ExperimentConfig`.
"""

from typing import Any

# The schedule that turns at --swa_start_round and cycles over --swa_cycle.
SWA_SCHEDULE = 'swa_cyclic'


def check_swa_flags(config: Any, defaults: Any, problems: Any) -> None:
  """Adds a problem naming the flags for each SWA flag that does not fit.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    defaults: `ExperimentConfig()`, whose values count as "not given".
    problems: The `config.Problems` each misfit is added to.
  """
  start, cycle = config.swa_start_round, config.swa_cycle
  if not start and cycle != defaults.swa_cycle:
    problems.add('--swa_cycle needs --swa_start_round >= 1 (server-side SWA).')
  if start and config.window_size:
    problems.add(
        '--swa_start_round (server-side SWA, the comparison of WiMA) and '
        '--window_size are two read-outs of one run: use one.'
    )
  if start and start + cycle > config.total_rounds:
    problems.add(
        f'--swa_start_round ({start}) plus --swa_cycle ({cycle}) must be <= '
        f'--total_rounds ({config.total_rounds}): the first model is averaged '
        'at round --swa_start_round + --swa_cycle.'
    )
  if config.client_lr_schedule == SWA_SCHEDULE:
    if not start:
      problems.add(
          f'--client_lr_schedule={SWA_SCHEDULE} needs --swa_start_round >= 1, '
          'the round it starts cycling.'
      )
    elif cycle < 2:
      problems.add(
          f'--client_lr_schedule={SWA_SCHEDULE} needs --swa_cycle >= 2 (with '
          'c = 1 the authors keep the rate constant); '
          f'got --swa_cycle={cycle}.'
      )
