"""One yardstick for every verdict: a difference over seeds, its 95% interval.

RESULTS.md judges every claim "A beats B" by one rule, computed here:

- Per seed, the difference A - B (paired: the same seed, and for window vs
  global the same trajectory). Over the n seeds: its mean, its sample std
  (ddof=1), the 95% t interval mean +- t(0.975, n - 1) * std / sqrt(n), and
  the count of seeds where it is positive.
- The verdict: "Yes" if the interval lies above 0, "No" if it lies below 0,
  "within noise" if it contains 0. One seed gives no interval, and says so.

`paired_difference` applies it to per-seed differences. Two forms serve the
claims whose per-seed values are not stored (`results/runs.csv` has each
run's last-N accuracy, not its smoothness or each window of a sweep):
`from_summary` takes a paired difference's mean and sample std over seeds
(`population_to_sample_std` converts a table's population std), and
`unpaired_difference` compares two rows' seed means with the standard error
sqrt((s_a^2 + s_b^2) / n) and n - 1 degrees of freedom (Welch's interval
with its smallest degrees of freedom: wider, so more often "within noise").
"""

from collections.abc import Sequence
import dataclasses
import math
from typing import Optional

import numpy as np

# t(0.975, dof), the two-sided 95% quantile of Student's t, for dof 1..30
# (standard tables; e.g. 4.303 for 2 dof, 3 seeds).
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

YES = 'Yes'
NO = 'No'
WITHIN_NOISE = 'within noise'
ONE_SEED = 'one seed: no interval'


def t_quantile_975(dof: int) -> float:
  """t(0.975, dof), from a table of dof 1..30.

  Raises:
    ValueError: `dof` is not an integer in 1..30.
  """
  if not isinstance(dof, (int, np.integer)) or not 1 <= dof <= len(_T_975):
    raise ValueError(
        f'`dof` must be an integer in 1..{len(_T_975)} (the tabulated t '
        f'quantiles); got {dof!r}.'
    )
  return _T_975[int(dof) - 1]


@dataclasses.dataclass(frozen=True)
class Difference:
  """A difference A - B over seeds and its verdict by the module's rule.

  Attributes:
    n: Seeds.
    mean: Mean of the difference.
    std: Its sample std (ddof=1) for a paired difference; for an unpaired
      one, sqrt(s_a^2 + s_b^2), so that std / sqrt(n) is the standard error.
      None with one seed.
    low: Lower end of the 95% t interval (None with one seed).
    high: Upper end (None with one seed).
    positive: Seeds where the difference is > 0; None if the per-seed
      values are not known.
  """

  n: int
  mean: float
  std: Optional[float]
  low: Optional[float]
  high: Optional[float]
  positive: Optional[int]

  @property
  def verdict(self) -> str:
    """'Yes' (interval above 0), 'No' (below 0) or 'within noise'."""
    if self.low is None:
      return ONE_SEED
    if self.low > 0:
      return YES
    if self.high < 0:
      return NO
    return WITHIN_NOISE


def _with_interval(mean, std, n, positive):
  """The Difference of `mean`, `std` over `n` seeds with its t interval."""
  if n == 1:
    return Difference(1, float(mean), None, None, None, positive)
  half_width = t_quantile_975(n - 1) * std / math.sqrt(n)
  return Difference(
      n, float(mean), float(std), mean - half_width, mean + half_width, positive
  )


def _check_n(n):
  if not isinstance(n, (int, np.integer)) or n < 1:
    raise ValueError(f'`n` (seeds) must be a positive integer; got {n!r}.')


def paired_difference(differences: Sequence[float]) -> Difference:
  """The rule applied to per-seed differences A - B.

  Args:
    differences: One finite value per seed.

  Raises:
    ValueError: `differences` is empty, not one-dimensional or not finite.
  """
  values = np.asarray(differences, dtype=np.float64)
  if values.ndim != 1 or values.size == 0:
    raise ValueError(
        '`differences` must be a non-empty sequence of numbers, one per '
        f'seed; got shape {values.shape}.'
    )
  if not np.all(np.isfinite(values)):
    raise ValueError(f'`differences` must be finite; got {values.tolist()}.')
  std = float(np.std(values, ddof=1)) if values.size > 1 else None
  return _with_interval(
      float(np.mean(values)), std, values.size, int(np.sum(values > 0))
  )


def population_to_sample_std(std: float, n: int) -> float:
  """The sample std (ddof=1) of n values whose population std is `std`."""
  _check_n(n)
  if n == 1:
    raise ValueError('`n` must be at least 2 for a sample std; got 1.')
  return std * math.sqrt(n / (n - 1))


def from_summary(mean: float, sample_std: float, n: int) -> Difference:
  """The rule from a paired difference's mean and sample std over n seeds.

  The count of positive seeds is unknown (None).
  """
  _check_n(n)
  if sample_std < 0:
    raise ValueError(f'`sample_std` must be >= 0; got {sample_std}.')
  return _with_interval(mean, sample_std, n, None)


def unpaired_difference(
    mean_a: float, std_a: float, mean_b: float, std_b: float, n: int
) -> Difference:
  """The rule for mean_a - mean_b of two rows of n seeds each, unpaired.

  Args:
    mean_a: Row A's mean over seeds.
    std_a: Row A's sample std over seeds.
    mean_b: Row B's mean over seeds.
    std_b: Row B's sample std over seeds.
    n: Seeds per row.
  """
  _check_n(n)
  if std_a < 0 or std_b < 0:
    raise ValueError(f'The stds must be >= 0; got {std_a}, {std_b}.')
  return _with_interval(
      mean_a - mean_b, math.sqrt(std_a**2 + std_b**2), n, None
  )


def format_difference(difference: Difference, scale: float = 1.0) -> str:
  """'mean +- std [low, high], k/n > 0: verdict', 4 decimals after `scale`.

  E.g. '+0.1397 +- 0.0229 [+0.0829, +0.1966], 3/3 > 0: Yes'.
  """
  d = difference
  text = f'{d.mean * scale:+.4f}'
  if d.low is not None:
    text += (
        f' +- {d.std * scale:.4f} [{d.low * scale:+.4f}, '
        f'{d.high * scale:+.4f}]'
    )
  if d.positive is not None:
    text += f', {d.positive}/{d.n} > 0'
  return f'{text}: {d.verdict}'
