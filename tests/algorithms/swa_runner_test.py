"""`SwaRunner`: server-side SWA (FedSWA) against the authors' update rule.

The reference is written from the authors' code (debcaldarola/fedsam,
`models/main.py` `main()` and `models/servers/fedavg_server.py`
`Server.update_swa_model`), in their 0-based rounds i: at rounds i > S with
(i - S) % c == 0, alpha = 1 / (n + 1), swa <- swa * (1 - alpha) + w * alpha,
n <- n + 1; our round t = i + 1 and t_s = S + 1.
"""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import softmax_task as task
from tests.training import loop_fixtures
from tff_fedwin import round_runner
from tff_fedwin.algorithms import fed_win
from tff_fedwin.algorithms import swa_runner

ModelWeights = tff.learning.models.ModelWeights
ROUNDS = 9
_RNG = np.random.default_rng(66)
# w^0, w^1, ..., w^ROUNDS of a tiny model: a 3x2 kernel and a bias.
GLOBAL_MODELS = [
    (
        _RNG.normal(size=(3, 2)).astype(np.float32),
        _RNG.normal(size=(2,)).astype(np.float32),
    )
    for _ in range(ROUNDS + 1)
]


class KnownModelsRunner(round_runner.RoundRunner):
  """A runner whose state is t and whose global model is GLOBAL_MODELS[t]."""

  def initialize(self):
    return 0

  def initial_client_state(self):
    return None

  def run_round(self, state, datasets, client_states):
    del datasets, client_states  # Unused.
    return state + 1, None, collections.OrderedDict(loss=float(state))

  def global_model_weights(self, state):
    return ModelWeights(trainable=list(GLOBAL_MODELS[state]), non_trainable=[])

  def window_model_weights(self, state):
    return self.global_model_weights(state)


def _authors_swa(swa_start, cycle):
  """(n, swa model or None) after each of our rounds t = 1..ROUNDS."""
  out, swa, n = [], None, 0
  for i in range(ROUNDS):  # The authors' 0-based round.
    w = GLOBAL_MODELS[i + 1]  # After their update_model() of round i.
    if i > swa_start and (i - swa_start) % cycle == 0:
      alpha = 1.0 / (n + 1)
      swa = (
          w
          if swa is None
          else [s * (1 - alpha) + x * alpha for s, x in zip(swa, w)]
      )
      n += 1
    out.append((n, swa))
  return out


def _running_mean_float32(models):
  """(swa * n + w) / (n + 1) in float32, in the order of `models`."""
  swa = None
  for n, w in enumerate(models):
    if swa is None:
      swa = [np.float32(0) * x + x for x in w]
      continue
    swa = [(s * np.float32(n) + x) / np.float32(n + 1) for s, x in zip(swa, w)]
  return swa


@pytest.mark.parametrize('start_round, cycle', [(1, 1), (2, 2), (3, 3), (8, 1)])
def test_swa_model_is_the_authors_running_mean_at_each_round(
    start_round, cycle
):
  runner = swa_runner.SwaRunner(KnownModelsRunner(), start_round, cycle)
  expected = _authors_swa(start_round - 1, cycle)
  state = runner.initialize()
  averaged = []
  for t in range(1, ROUNDS + 1):
    state, _, metrics = runner.run_round(state, [], None)
    n, authors = expected[t - 1]
    updated = runner.updates_at(t)
    if updated:
      averaged.append(GLOBAL_MODELS[t])
    assert int(metrics['swa']['swa_count']) == n == len(averaged)
    assert int(metrics['swa']['swa_updated']) == int(updated)
    assert metrics['loss'] == t - 1
    window = runner.window_model_weights(state)
    if n == 0:
      assert not runner.swa_active(state)
      for a, e in zip(window.trainable, GLOBAL_MODELS[t]):
        np.testing.assert_array_equal(a, e)
      continue
    assert runner.swa_active(state)
    # Exactly our float32 arithmetic; the authors' form and the plain mean to
    # float32 rounding.
    for a, e in zip(window.trainable, _running_mean_float32(averaged)):
      np.testing.assert_array_equal(a.numpy(), e)
    for a, e, m in zip(window.trainable, authors, zip(*averaged)):
      np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)
      np.testing.assert_allclose(a, np.mean(m, axis=0), rtol=1e-6, atol=1e-7)
    # The clients' (global) model stays the wrapped runner's w^t.
    for a, e in zip(
        runner.global_model_weights(state).trainable, GLOBAL_MODELS[t]
    ):
      np.testing.assert_array_equal(a, e)
    assert runner.has_window(state)


def test_update_rounds_follow_the_authors_rounds():
  # S = 4 (t_s = 5), c = 3: the authors update at i = 7, 10, 13 -> t = 8, 11, 14.
  runner = swa_runner.SwaRunner(KnownModelsRunner(), 5, 3)
  assert [t for t in range(1, 15) if runner.updates_at(t)] == [8, 11, 14]


def test_state_holds_typed_tensors():
  runner = swa_runner.SwaRunner(KnownModelsRunner(), 1, 1)
  state = runner.initialize()
  assert isinstance(state, swa_runner.SwaRunnerState)
  assert isinstance(state.swa_model, ModelWeights)
  assert state.swa_count.dtype.name == 'int64'
  assert int(state.swa_count) == 0 and int(state.round_num) == 0
  assert runner.has_window(state) and not runner.swa_active(state)


@pytest.mark.parametrize(
    'kwargs, match',
    [
        (dict(start_round=0, cycle=1), 'start_round'),
        (dict(start_round=2, cycle=0), 'cycle'),
        (dict(start_round=1.5, cycle=1), 'start_round'),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
  with pytest.raises(ValueError, match=match):
    swa_runner.SwaRunner(KnownModelsRunner(), **kwargs)


def test_a_runner_is_required():
  with pytest.raises(ValueError, match='`runner` must be'):
    swa_runner.SwaRunner(object(), 1, 1)


class RecordingSwaRunner(swa_runner.SwaRunner):
  """A `SwaRunner` that keeps the state of every round it runs."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.states = []

  def run_round(self, state, datasets, client_states):
    out = super().run_round(state, datasets, client_states)
    self.states.append(out[0])
    return out


@pytest.fixture(scope='module')
def processes():
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=0.5)
  return {'fedavg': fed_win.build_fed_win(task.model_fn, sgd)}


def _swa_run(processes, crash_at_call=None):
  inner = loop_fixtures.make_runner(processes, 'fedavg', crash_at_call)
  return RecordingSwaRunner(inner, start_round=1, cycle=1)


def _without_times(row):
  return {k: v for k, v in row.items() if not k.endswith('time_seconds')}


def test_resumed_run_has_the_uninterrupted_swa_model(processes, tmp_path):
  # Checkpoints at rounds 2 and 4; the run dies in round 3 and resumes at 2.
  reference = _swa_run(processes)
  loop_fixtures.run(reference, tmp_path / 'reference')
  with pytest.raises(loop_fixtures.Crash):
    loop_fixtures.run(_swa_run(processes, 3), tmp_path / 'resumed')
  resumed = _swa_run(processes)

  summary = loop_fixtures.run(resumed, tmp_path / 'resumed')

  assert summary['resumed_from_round'] == 2
  assert summary['has_window']
  final, expected = resumed.states[-1], reference.states[-1]
  assert int(final.swa_count) == int(expected.swa_count) == 3
  for a, e in zip(task.leaves(final), task.leaves(expected)):
    np.testing.assert_array_equal(a, e)
  rows = loop_fixtures.read_csv(tmp_path / 'resumed')
  reference_rows = loop_fixtures.read_csv(tmp_path / 'reference')
  assert [_without_times(r) for r in rows] == [
      _without_times(r) for r in reference_rows
  ]
  # t_s = 1, c = 1: updates after rounds 2, 3 and 4.
  assert [r['train/swa/swa_count'] for r in rows] == ['0', '1', '2', '3']
