"""The client learning-rate schedule and server-side SWA flags, and their fit.

`--client_lr_schedule` picks the clients' per-round rate (docs/design.md,
"IMA's client learning-rate schedule"): `constant`; `decay`, 0.99^t (IMA's
baselines, and IMA Table 3's "NA decay"); or one of IMA's decay schemes from
IMA's start round t_s = `--window_start_round` on (`IMA_SCHEDULES`, 0.99^t
before it): `ima` (0.97 a round, IMA's own), `ima_constant` (the small
constant `--client_lr_low`) and `ima_cyclic` (falling from the rate reached
at t_s to `--client_lr_low` over every `--client_lr_cycle` rounds); or
`swa_cyclic`, FedSWA's cyclic rate between the run's rate and
`--client_lr_low` over every `--swa_cycle` rounds from `--swa_start_round`
on. The schedules are `tff_fedwin.algorithms.scheduled_client_work`'s.

`--swa_start_round` t_s (0: no SWA) and `--swa_cycle` c wrap the run's runner
in `tff_fedwin.algorithms.SwaRunner` (FedSWA, WiMA's comparison; docs/
design.md, "Server-side SWA (WiMA's comparison)"); `swa_cyclic` uses the same
c (the authors' one `--swa-c` sets both the rate's cycle and the averaging
period: a second flag would have to agree with it). Checked before any TFF
work, every misfit reported, each naming its flags.
"""

from typing import Any

from tff_fedwin.experiments import problems as problems_lib

LR_SCHEDULES = (
    'constant',
    'decay',
    'ima',
    'ima_constant',
    'ima_cyclic',
    'swa_cyclic',
)
# The schedules that turn at IMA's start round.
IMA_SCHEDULES = ('ima', 'ima_constant', 'ima_cyclic')
# The schedule that turns at --swa_start_round and cycles over --swa_cycle.
SWA_SCHEDULE = 'swa_cyclic'
# Flag -> the schedules that read it; a non-default value with another
# schedule is refused (nothing silently ignored).
SCHEDULE_FLAGS = {
    'client_lr_low': ('ima_constant', 'ima_cyclic', 'swa_cyclic'),
    'client_lr_cycle': ('ima_cyclic',),
}


def after_start(config: Any) -> tuple[Any, ...]:
  """What decides the rate from t_s on: the schedule and the flags it reads."""
  return (config.client_lr_schedule,) + tuple(
      getattr(config, flag)
      for flag, schedules in SCHEDULE_FLAGS.items()
      if config.client_lr_schedule in schedules
  )


def check_schedule_flags(config: Any, problems: Any) -> None:
  """Adds a problem naming the flag for each schedule flag that does not fit.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    problems: The `problems.Problems` each misfit is added to.
  """
  for flag, schedules in SCHEDULE_FLAGS.items():
    if problems_lib.given(config, flag) and (
        config.client_lr_schedule not in schedules
    ):
      problems.add(
          f'--{flag} is only used with --client_lr_schedule='
          f'{" or --client_lr_schedule=".join(schedules)}.'
      )
  if config.client_epochs_decay_every > 0 and config.client_epochs < 2:
    problems.add(
        '--client_epochs_decay_every takes one local epoch fewer every that '
        'many rounds from --window_start_round on, down to 1: it needs '
        f'--client_epochs >= 2; got --client_epochs={config.client_epochs}.'
    )
  rate = config.client_learning_rate
  if config.client_lr_schedule == 'ima_cyclic' and rate is not None:
    # None: the task's rate, checked when the schedule is built.
    top = rate * 0.99**config.window_start_round
    if not config.client_lr_low < top:
      problems.add(
          '--client_lr_low must be below the rate each cycle of '
          '--client_lr_schedule=ima_cyclic falls from, --client_learning_rate '
          f'* 0.99^--window_start_round = {top:.6g}; got '
          f'{config.client_lr_low!r}.'
      )


def check_swa_flags(config: Any, problems: Any) -> None:
  """As `check_schedule_flags`, for the SWA flags and `SWA_SCHEDULE`."""
  start, cycle = config.swa_start_round, config.swa_cycle
  if not start and problems_lib.given(config, 'swa_cycle'):
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
