"""Tests for tff_fedwin.algorithms.multi_round against numpy FedAvg / IMA."""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear_task as task
from tff_fedwin.algorithms import build_fed_win
from tff_fedwin.algorithms import build_multi_round_process


def _tff_fed_avg():
  return tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn, tff.learning.optimizers.build_sgdm(task.CLIENT_LR)
  )


class TestBuildMultiRoundProcessComputation:

  def test_next_type_takes_a_tuple_of_datasets_per_client(self):
    process = build_multi_round_process(_tff_fed_avg(), 3)
    data_type = process.next.type_signature.parameter[1]
    assert data_type.placement is tff.CLIENTS
    assert len(data_type.member) == 3
    assert all(isinstance(t, tff.SequenceType) for t in data_type.member)
    assert len(process.next.type_signature.result.metrics.member) == 3

  def test_type_signatures_repeat_the_inner_process_types(self):
    # State in and out as the inner process; data and metrics: a tuple of 3
    # of the inner process's per-round types.
    inner = _tff_fed_avg()
    process = build_multi_round_process(inner, 3)
    state_type, data_type = inner.next.type_signature.parameter
    metrics_type = inner.next.type_signature.result.metrics
    tff.test.assert_types_identical(
        process.initialize.type_signature, inner.initialize.type_signature
    )
    tff.test.assert_types_identical(
        process.next.type_signature.parameter,
        tff.StructWithPythonType(
            [
                ('state', state_type),
                (
                    'rounds_data',
                    tff.FederatedType(
                        tff.StructWithPythonType([data_type.member] * 3, tuple),
                        tff.CLIENTS,
                    ),
                ),
            ],
            collections.OrderedDict,
        ),
    )
    tff.test.assert_types_identical(
        process.next.type_signature.result,
        tff.to_type(
            tff.learning.templates.LearningProcessOutput(
                state=state_type,
                metrics=tff.FederatedType(
                    tff.StructWithPythonType([metrics_type.member] * 3, tuple),
                    tff.SERVER,
                ),
            )
        ),
    )
    tff.test.assert_types_identical(
        process.get_model_weights.type_signature,
        inner.get_model_weights.type_signature,
    )


class TestBuildMultiRoundProcessExecution:

  @pytest.mark.parametrize('mode', ['evaluate', 'broadcast'])
  def test_rounds_in_one_call_follow_numpy_trajectory_and_window(self, mode):
    # Two calls of 3 rounds = rounds 1..6 of numpy FedAvg/IMA with W=3, E=3.
    window_size, calls, per_call = 3, 2, 3
    read_every = per_call if mode == 'evaluate' else 1
    process = build_multi_round_process(
        build_fed_win(
            task.model_fn,
            tff.learning.optimizers.build_sgdm(task.CLIENT_LR),
            window_size=window_size,
            window_mode=mode,
            window_read_every=read_every,
        ),
        per_call,
    )
    expected = task.simulate(window_size, mode, 0, calls * per_call)
    data = [tuple([d] * per_call) for d in task.client_datasets()]
    state = process.initialize()
    for call in range(1, calls + 1):
      output = process.next(state, data)
      state = output.state
      t = call * per_call
      np.testing.assert_allclose(
          task.kernel(state.global_model_weights),
          expected['sent'][t],
          atol=1e-5,
      )
      np.testing.assert_allclose(
          task.kernel(process.get_model_weights(state)),
          expected['window'][t],
          atol=1e-5,
      )
      fills = [m['finalizer']['window']['window_fill'] for m in output.metrics]
      assert fills == [
          min(t - per_call + r, window_size) for r in range(1, per_call + 1)
      ]

  def test_tff_fed_avg_in_one_call_matches_numpy_fedavg(self):
    per_call = 4
    process = build_multi_round_process(_tff_fed_avg(), per_call)
    expected = task.simulate(1, 'evaluate', 0, per_call)
    state = process.next(
        process.initialize(),
        [tuple([d] * per_call) for d in task.client_datasets()],
    ).state
    np.testing.assert_allclose(
        task.kernel(state.global_model_weights),
        expected['aggregated'][per_call],
        atol=1e-5,
    )


class TestBuildMultiRoundProcessArguments:

  @pytest.mark.parametrize('rounds_per_call', [0, 1.5, True])
  def test_bad_rounds_per_call_raises(self, rounds_per_call):
    with pytest.raises(ValueError, match='rounds_per_call'):
      build_multi_round_process(_tff_fed_avg(), rounds_per_call)

  def test_non_learning_process_raises(self):
    with pytest.raises(TypeError, match='LearningProcess'):
      build_multi_round_process(object(), 2)
