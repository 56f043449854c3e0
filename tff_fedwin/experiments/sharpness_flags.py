"""The sharpness-aware client flags and how they fit the run.

`--client_sharpness=sam|asam` trains the clients with SAM (FedSAM) or ASAM
(FedASAM) steps (`tff_fedwin.algorithms.sharpness`; docs/design.md,
"Sharpness-aware clients"), with radius `--sam_rho` (no default: the papers
tune it, e.g. IMA Table 5's 0.2 or SAM's 0.05) and ASAM's `--sam_eta`
(default 0.01, ASAM's). Checked before any TFF work, every misfit reported,
each naming its flags. `config` is an `ExperimentConfig`.
"""

from typing import Any

from tff_fedwin import choices

# 'none': plain client steps.
CLIENT_SHARPNESS = ('none', *choices.SHARPNESS_KINDS)


def check_sharpness_flags(
    config: Any, defaults: Any, problems: Any, algorithms: tuple[str, ...]
) -> None:
  """Adds a problem naming the flags for each sharpness flag that does not fit.

  Args:
    config: An `ExperimentConfig` whose flags passed their own checks.
    defaults: `ExperimentConfig()`, whose values count as "not given".
    problems: The `config.Problems` each misfit is added to.
    algorithms: The `--algorithm`s whose clients run on the client-training
      core (the ones that can take the step).
  """
  kind = config.client_sharpness
  if kind == 'none':
    if config.sam_rho != defaults.sam_rho or config.sam_eta != defaults.sam_eta:
      problems.add(
          '--sam_rho and --sam_eta need --client_sharpness=sam or asam.'
      )
    return
  if config.algorithm not in algorithms:
    problems.add(
        f'--client_sharpness is supported with --algorithm='
        f'{", ".join(algorithms)}; got {config.algorithm!r} (TFF\'s Mime Lite '
        "builder runs its own client steps; MIME's second gradient of a "
        "step is at x; FedFA's step reads the features)."
    )
  if not config.sam_rho > 0:
    problems.add(
        f'--client_sharpness={kind} needs --sam_rho > 0, the neighbourhood '
        "radius (IMA Table 5's FedASAM: 0.2 with eta 0.05; SAM's own "
        f'default 0.05); got {config.sam_rho}.'
    )
  if kind == 'sam' and config.sam_eta != defaults.sam_eta:
    problems.add(
        '--sam_eta is read by --client_sharpness=asam only (T_w = |w| + eta).'
    )
