"""The client learning-rate schedule flags and how they fit together.

`--client_lr_schedule` picks the clients' per-round rate (docs/design.md,
"IMA's client learning-rate schedule"): `constant`; `decay`, 0.99^t (IMA's
baselines, and IMA Table 3's "NA decay"); or one of IMA's decay schemes from
IMA's start round t_s = `--window_start_round` on (`IMA_SCHEDULES`, 0.99^t
before it): `ima` (0.97 a round, IMA's own), `ima_constant` (the small
constant `--client_lr_low`) and `ima_cyclic` (falling from the rate reached
at t_s to `--client_lr_low` over every `--client_lr_cycle` rounds); or
`swa_cyclic`, FedSWA's cyclic rate between the run's rate and
`--client_lr_low` over every `--swa_cycle` rounds from `--swa_start_round`
on (`swa_flags`, which checks it fits SWA). Checked before
any TFF work, every misfit reported, each naming its flags; the schedules
themselves are `tff_fedwin.algorithms.scheduled_client_work`'s.
"""

from typing import Any

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


def check_schedule_flags(config: Any, defaults: Any, problems: Any) -> None:
  """Adds a problem naming the flag for each schedule flag that does not fit.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    defaults: `ExperimentConfig()`, whose values count as "not given".
    problems: The `config.Problems` each misfit is added to.
  """
  for flag, schedules in SCHEDULE_FLAGS.items():
    if getattr(config, flag) != getattr(defaults, flag) and (
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
