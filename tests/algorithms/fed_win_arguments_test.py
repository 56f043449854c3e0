"""Tests for tff_fedwin.algorithms.fed_win.build_fed_win: argument checks."""

import pytest
import tensorflow_federated as tff

from tests import linear_task as task
from tests.linear_task import CLIENT_LR
from tests.linear_task import model_fn
from tff_fedwin.algorithms import fed_win


class TestBuildFedWinArguments:

  @pytest.mark.parametrize(
      'kwargs,error,pattern',
      [
          (dict(window_size=0), ValueError, 'window_size'),
          (dict(window_size=2.5), ValueError, 'window_size'),
          (
              dict(window_size=3, window_mode='average'),
              ValueError,
              '`window_mode` must be one of evaluate, broadcast',
          ),
          (
              dict(window_size=3, window_start_round=-1),
              ValueError,
              'start_round',
          ),
          (dict(window_size=3, window_read_every=0), ValueError, 'read_every'),
          (
              dict(window_size=3, window_mode='broadcast', window_read_every=2),
              ValueError,
              'read_every',
          ),
      ],
  )
  def test_bad_window_arguments_raise_naming_the_argument(
      self, kwargs, error, pattern
  ):
    with pytest.raises(error, match=pattern):
      fed_win.build_fed_win(
          model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR), **kwargs
      )

  @pytest.mark.parametrize(
      'kwargs,pattern',
      [
          (dict(client_loss='focal'), '`client_loss` must be one of ce, wsm'),
          (dict(client_loss='wsm'), 'num_classes'),
          (dict(proximal_strength=-0.1), 'proximal_strength'),
      ],
  )
  def test_bad_client_loss_arguments_raise(self, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
      fed_win.build_fed_win(
          task.softmax_model_fn,
          tff.learning.optimizers.build_sgdm(CLIENT_LR),
          **kwargs,
      )
