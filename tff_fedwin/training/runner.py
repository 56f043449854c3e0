"""The interface between the training loop and a federated process.

`run_training` drives any process through a `tff_fedwin.round_runner.
RoundRunner`; the runners of this package's algorithms are in
`tff_fedwin.algorithms.runners`.
"""

from typing import Any

from tff_fedwin import round_runner

ModelWeights = round_runner.ModelWeights
RoundRunner = round_runner.RoundRunner
ForwardingRunner = round_runner.ForwardingRunner


def check_runner(runner: Any) -> None:
  """Raises ValueError unless `runner` is a `RoundRunner`."""
  if not isinstance(runner, RoundRunner):
    raise ValueError(
        '`runner` must be a tff_fedwin.training.RoundRunner (subclass it, as '
        'tff_fedwin.algorithms.runners.LearningProcessRunner does), got '
        f'{type(runner).__name__}.'
    )
