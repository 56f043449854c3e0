"""Tests for tff_fedwin.training.divergence: which losses stop a run."""

import math

import pytest

from tff_fedwin.training import divergence


@pytest.mark.parametrize(
    'values, expected',
    [
        ({}, None),
        ({'train/loss': 0.5, 'window/loss': 2.0}, None),
        ({'train/finalizer/update_non_finite': 0}, None),
        # TFF's optimizers skip a non-finite aggregate and set this flag.
        (
            {'train/loss': 0.0, 'train/finalizer/update_non_finite': 1},
            ('train/finalizer/update_non_finite', 1),
        ),
        # Only metrics whose last component is `loss` or ends in `_loss` count:
        # accuracy NaN is not a divergence, `lossy` and `loss_sum` are others.
        (
            {
                'window/accuracy': math.nan,
                'lossy': math.inf,
                'train/loss_sum': math.nan,
            },
            None,
        ),
        (
            {'train/client_work/train/loss': math.nan},
            ('train/client_work/train/loss', math.nan),
        ),
        ({'loss': math.inf}, ('loss', math.inf)),
        # SCAFFOLD reports its mean client loss as `train_loss`.
        ({'train/train_loss': math.nan}, ('train/train_loss', math.nan)),
        ({'global/loss': -math.inf}, ('global/loss', -math.inf)),
        # The first one in the mapping's order is reported.
        (
            {'a/loss': 1.0, 'b/loss': math.inf, 'c/loss': math.nan},
            ('b/loss', math.inf),
        ),
    ],
)
def test_first_divergence_metric(values, expected):
  found = divergence.first_divergence_metric(values)
  if expected is None:
    assert found is None
  else:
    assert found[0] == expected[0]
    assert (
        math.isnan(found[1])
        and math.isnan(expected[1])
        or found[1] == expected[1]
    )


@pytest.mark.parametrize(
    'values',
    [
        {'train/loss': 1.0},
        # Finite extremes, a NaN metric that is no loss, the flag at 0.
        {'train/loss': -1e30, 'global/loss': 1e30, 'window/accuracy': math.nan},
        {'train/finalizer/update_non_finite': 0},
    ],
)
def test_check_passes_finite_losses(values):
  assert (
      divergence.check_training_finite(
          values,
          round_num=3,
          experiment_name='e',
          last_checkpoint_round=2,
      )
      is None
  )


@pytest.mark.parametrize(
    'checkpoint, kept',
    [
        (7, 'The checkpoint of round 7 is intact.'),
        (None, None),
    ],
)
def test_check_names_round_metric_checkpoint_and_cause(checkpoint, kept):
  # A non-finite loss.
  with pytest.raises(
      divergence.TrainingDivergedError,
      match='^exp: train/x/loss is nan at round 9;',
  ) as raised:
    divergence.check_training_finite(
        {'train/x/loss': math.nan},
        round_num=9,
        experiment_name='exp',
        last_checkpoint_round=checkpoint,
    )
  message = str(raised.value)
  assert 'learning rate' in message and '\n' not in message
  assert (kept in message) if kept else ('checkpoint' not in message)
  assert raised.value.round_num == 9
  assert raised.value.metric == 'train/x/loss'


def test_check_says_the_server_skipped_a_non_finite_update():
  with pytest.raises(
      divergence.TrainingDivergedError, match='update_non_finite is 1'
  ) as raised:
    divergence.check_training_finite(
        {'train/finalizer/update_non_finite': 1},
        round_num=1,
        experiment_name='exp',
        last_checkpoint_round=0,
    )
  assert str(raised.value).startswith(
      'exp: train/finalizer/update_non_finite is 1 (the aggregated update was '
      'NaN or inf; the server skipped it) at round 1; stopped before recording '
      'that round. The checkpoint of round 0 is intact.'
  )
