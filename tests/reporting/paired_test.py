"""`paired`: the one rule of RESULTS.md's verdicts, against hand arithmetic."""

import math

import pytest

from tff_fedwin.reporting import paired


def test_three_seeds_with_zero_in_the_interval_are_within_noise():
  # Differences [1, 2, 3]: mean 2; sample std sqrt(((1-2)^2 + 0 + (3-2)^2)
  # / 2) = 1; half-width t(0.975, 2) * 1 / sqrt(3) = 4.303 / 1.7320508 =
  # 2.4843...; interval [-0.4843, 4.4843] holds 0 -> within noise.
  d = paired.paired_difference([1.0, 2.0, 3.0])
  assert (d.n, d.mean, d.std, d.positive) == (3, 2.0, 1.0, 3)
  assert d.low == pytest.approx(2.0 - 4.303 / math.sqrt(3), abs=1e-12)
  assert d.high == pytest.approx(2.0 + 4.303 / math.sqrt(3), abs=1e-12)
  assert d.low == pytest.approx(-0.4843, abs=1e-4)
  assert d.verdict == 'within noise'


def test_an_interval_above_zero_is_yes_and_below_zero_is_no():
  # [2, 3, 4]: mean 3, sample std 1, interval 3 +- 2.4843 = [0.5157,
  # 5.4843] > 0 -> Yes; the negated values give [-5.4843, -0.5157] -> No.
  yes = paired.paired_difference([2.0, 3.0, 4.0])
  assert yes.low == pytest.approx(0.5157, abs=1e-4)
  assert (yes.verdict, yes.positive) == ('Yes', 3)
  no = paired.paired_difference([-2.0, -3.0, -4.0])
  assert no.high == pytest.approx(-0.5157, abs=1e-4)
  assert (no.verdict, no.positive) == ('No', 0)


def test_two_seeds_use_the_one_dof_quantile():
  # [1, 3]: mean 2, sample std sqrt(2); half-width 12.706 * sqrt(2) /
  # sqrt(2) = 12.706.
  d = paired.paired_difference([1.0, 3.0])
  assert d.std == pytest.approx(math.sqrt(2.0), abs=1e-12)
  assert (d.low, d.high) == pytest.approx((2.0 - 12.706, 2.0 + 12.706))


def test_one_seed_has_no_interval_and_says_so():
  d = paired.paired_difference([0.5])
  assert (d.n, d.mean, d.std, d.low, d.high, d.positive) == (
      1,
      0.5,
      None,
      None,
      None,
      1,
  )
  assert d.verdict == 'one seed: no interval'
  assert (
      paired.format_difference(d) == '+0.5000, 1/1 > 0: one seed: no interval'
  )


def test_format_difference_scales_to_points():
  # [0.01, 0.02, 0.03] in points: 2 +- 1 [-0.4843, +4.4843], 3/3 > 0.
  d = paired.paired_difference([0.01, 0.02, 0.03])
  assert paired.format_difference(d, scale=100) == (
      '+2.0000 +- 1.0000 [-0.4843, +4.4843], 3/3 > 0: within noise'
  )


@pytest.mark.parametrize(
    'bad, message',
    [
        ([], 'must be a non-empty sequence'),
        ([[1.0, 2.0]], 'must be a non-empty sequence'),
        ([1.0, float('nan')], 'must be finite'),
    ],
)
def test_bad_differences_fail_naming_the_argument(bad, message):
  with pytest.raises(ValueError, match=f'`differences` {message}'):
    paired.paired_difference(bad)


def test_t_quantiles_are_the_table_values():
  # Standard table of t(0.975, dof): 12.706 (1), 4.303 (2), 2.042 (30).
  assert paired.t_quantile_975(1) == 12.706
  assert paired.t_quantile_975(2) == 4.303
  assert paired.t_quantile_975(30) == 2.042
  with pytest.raises(ValueError, match=r'`dof` must be an integer in 1\.\.30'):
    paired.t_quantile_975(31)
  with pytest.raises(ValueError, match=r'`dof` must be an integer in 1\.\.30'):
    paired.t_quantile_975(0)


def test_t_quantiles_match_scipy_when_it_is_installed():
  stats = pytest.importorskip('scipy.stats')
  for dof in range(1, 31):
    assert paired.t_quantile_975(dof) == pytest.approx(
        stats.t.ppf(0.975, dof), abs=5e-4
    )


def test_population_std_converts_to_sample_std():
  # Values [1, 3]: population std 1, sample std sqrt(2) = 1 * sqrt(2 / 1).
  assert paired.population_to_sample_std(1.0, 2) == pytest.approx(
      math.sqrt(2.0)
  )
  with pytest.raises(ValueError, match='`n` must be at least 2'):
    paired.population_to_sample_std(1.0, 1)


def test_from_summary_has_no_seed_count():
  # Mean 2, sample std 1, 3 seeds: the interval of [1, 2, 3] above.
  d = paired.from_summary(2.0, 1.0, 3)
  assert d.positive is None
  assert d.low == pytest.approx(-0.4843, abs=1e-4)
  assert paired.format_difference(d) == (
      '+2.0000 +- 1.0000 [-0.4843, +4.4843]: within noise'
  )
  with pytest.raises(ValueError, match='`sample_std` must be >= 0'):
    paired.from_summary(2.0, -1.0, 3)
  with pytest.raises(ValueError, match=r'`n` \(seeds\) must be a positive'):
    paired.from_summary(2.0, 1.0, 0)


def test_unpaired_difference_uses_both_stds():
  # A 5 +- 3, B 1 +- 4 (sample stds), 3 seeds: difference 4, combined std
  # sqrt(9 + 16) = 5, half-width 4.303 * 5 / sqrt(3) = 12.4217 -> [-8.4217,
  # 16.4217]: within noise.
  d = paired.unpaired_difference(5.0, 3.0, 1.0, 4.0, 3)
  assert (d.mean, d.std) == (4.0, 5.0)
  assert d.low == pytest.approx(-8.4217, abs=1e-4)
  assert d.verdict == 'within noise'
  with pytest.raises(ValueError, match='The stds must be >= 0'):
    paired.unpaired_difference(5.0, -3.0, 1.0, 4.0, 3)
