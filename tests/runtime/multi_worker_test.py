"""Tests for tff_fedwin.runtime.multi_worker: one round over several workers.

References run on the session's single worker (tests/conftest.py); the
multi-worker contexts are nested on top of it. At most two extra workers run at
any time.
"""

import shutil
import threading
import time

import numpy as np
import portpicker
import pytest
import tensorflow_federated as tff

from benchmarks import stepped
from tests import linear_task as task
from tff_fedwin import runtime
from tff_fedwin.algorithms import build_fed_win
from tff_fedwin.algorithms import build_multi_round_process
from tff_fedwin.algorithms import LearningProcessRunner
from tff_fedwin.algorithms import scaffold
from tff_fedwin.algorithms import ScaffoldRunner
from tff_fedwin.runtime import multi_worker

_ROUNDS = 3


def _sgd():
  return tff.learning.optimizers.build_sgdm(task.CLIENT_LR)


def _run_learning_process(process, rounds=_ROUNDS):
  state = process.initialize()
  for _ in range(rounds):
    output = process.next(state, task.client_datasets())
    state = output.state
  return state, output.metrics


def _run_scaffold(process, rounds=_ROUNDS):
  state = process.initialize()
  client_states = [scaffold.initial_client_state(task.model_fn)] * 3
  for _ in range(rounds):
    state, client_states, metrics = process.next(
        state, task.client_datasets(), client_states
    )
  return state, client_states, metrics


def _assert_trees_equal(actual, expected, atol=1e-6):
  tff.structure.map_structure(
      lambda a, e: np.testing.assert_allclose(a, e, rtol=0, atol=atol),
      tff.structure.from_container(actual, recursive=True),
      tff.structure.from_container(expected, recursive=True),
  )


@tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
def _sum_at_server(values):
  return tff.federated_sum(values)


def _invoke_with_deadline(context, fn, timeout_seconds):
  """Runs `fn()` in `context` on a daemon thread; returns (result, error).

  TFF's context stack is per thread, so `context` is installed on the new one.
  """
  outcome = {}

  def target():
    try:
      with tff.framework.get_context_stack().install(context):
        outcome['result'] = fn()
    except Exception as e:  # pylint: disable=broad-except
      outcome['error'] = e

  thread = threading.Thread(target=target, daemon=True)
  thread.start()
  thread.join(timeout_seconds)
  assert not thread.is_alive(), f'no answer within {timeout_seconds} s'
  return outcome.get('result'), outcome.get('error')


class TestOverTwoWorkers:
  """Algorithms over two workers started once for the class."""

  @pytest.fixture(scope='class')
  def addresses(self, tmp_path_factory):
    log_dir = str(tmp_path_factory.mktemp('multi_workers'))
    workers = []
    try:
      for _ in range(2):
        workers.append(runtime.start_local_worker(log_dir=log_dir))
      yield [w.address for w in workers]
    finally:
      for worker in workers:
        worker.stop()

  def test_fed_avg_equals_single_worker(self, addresses):
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn, _sgd()
    )
    expected_state, expected_metrics = _run_learning_process(process)
    with multi_worker.multi_worker_execution_context(addresses=addresses):
      state, metrics = _run_learning_process(process)
    _assert_trees_equal(state, expected_state)
    _assert_trees_equal(metrics, expected_metrics)
    assert metrics['client_work']['train']['num_examples'] == 12

  def test_fed_win_with_window_equals_single_worker(self, addresses):
    process = build_fed_win(task.model_fn, _sgd(), window_size=2)
    expected_state, expected_metrics = _run_learning_process(process)
    with multi_worker.multi_worker_execution_context(addresses=addresses):
      state, metrics = _run_learning_process(process)
      window_model = process.get_model_weights(state)
    _assert_trees_equal(state, expected_state)
    _assert_trees_equal(window_model, process.get_model_weights(expected_state))
    assert metrics['finalizer']['window']['window_fill'] == 2
    # The window model differs from the global one, so both were checked.
    assert not np.allclose(
        task.kernel(window_model), task.kernel(state.global_model_weights)
    )
    _assert_trees_equal(metrics, expected_metrics)

  def test_scaffold_equals_single_worker_with_clients_in_order(self, addresses):
    # TFF's mergeable context would return the client states in the order the
    # workers finish; the context keeps them in client order.
    process = scaffold.build_scaffold(
        task.model_fn, client_learning_rate=task.CLIENT_LR, total_clients=3
    )
    expected = _run_scaffold(process)
    with multi_worker.multi_worker_execution_context(addresses=addresses):
      state, client_states, metrics = _run_scaffold(process)
    _assert_trees_equal(state, expected[0])
    assert len(client_states) == 3
    for actual, reference in zip(client_states, expected[1]):
      _assert_trees_equal(actual, reference)
    # Distinct client states: a permutation would have been caught.
    assert (
        len({np.asarray(s.control_variate[0]).tobytes() for s in client_states})
        == 3
    )
    _assert_trees_equal(metrics, expected[2])

  # With `by_id` the workers also build the clients' datasets from a tensor
  # bundle by id (`client_data_bundle`), each for the clients it gets.
  @pytest.mark.parametrize('by_id', [False, True], ids=['datasets', 'by_id'])
  @pytest.mark.parametrize('kind', ['fed_win_window', 'scaffold_files'])
  def test_server_state_in_files_equals_single_worker(
      self, addresses, tmp_path, kind, by_id
  ):
    # The state's read and write run where TFF places the SERVER's work; the
    # files must be the ones the next round reads on any worker.
    data, computation, bundle_dir = stepped.client_data_by_id(
        task.client_datasets(), by_id
    )

    def run(server_state_dir, dataset_computation=None):
      if kind == 'fed_win_window':
        runner = LearningProcessRunner(
            build_fed_win(task.model_fn, _sgd(), window_size=2),
            server_state_dir=server_state_dir,
            dataset_computation=dataset_computation,
        )
      else:
        runner = ScaffoldRunner(
            scaffold.build_scaffold(
                task.model_fn,
                client_learning_rate=task.CLIENT_LR,
                total_clients=3,
                client_state_transfer='files',
            ),
            scaffold.initial_client_state(task.model_fn),
            state_files_dir=str(
                tmp_path / ('values' if server_state_dir is None else 'files')
            ),
            server_state_dir=server_state_dir,
            dataset_computation=dataset_computation,
        )
      state, template = runner.initialize(), runner.initial_client_state()
      initial_kernel = task.kernel(state.global_model_weights)
      client_states = None if template is None else [template] * 3
      for _ in range(_ROUNDS):
        state, client_states, metrics = runner.run_round(
            state,
            task.client_datasets() if dataset_computation is None else data,
            client_states,
        )
      return initial_kernel, (state, client_states, metrics)

    _, expected = run(None)
    with multi_worker.multi_worker_execution_context(addresses=addresses):
      initial_kernel, actual = run(str(tmp_path / 'server'), computation)
    if bundle_dir is not None:
      shutil.rmtree(bundle_dir)

    for a, e in zip(actual, expected):
      if e is None:  # A LearningProcess's client states.
        assert a is None
      else:
        _assert_trees_equal(a, e)
    assert not np.allclose(
        task.kernel(actual[0].global_model_weights), initial_kernel
    )

  def test_workers_run_on_their_own_threads_concurrently(self, addresses):
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.model_fn, _sgd()
    )
    state = process.initialize()
    with multi_worker.multi_worker_execution_context(
        addresses=addresses
    ) as context:
      process.next(state, task.client_datasets())
      adapters = context.worker_contexts
      thread_idents = [a.thread_ident for a in adapters]
      # Both workers' invocations were dispatched before either finished.
      assert context.max_concurrent_invocations == 2
      for adapter in adapters:
        assert adapter.num_invocations > 0
        assert adapter.invocation_thread_idents == {adapter.thread_ident}
    assert len(set(thread_idents)) == 2
    assert threading.get_ident() not in thread_idents
    assert not any(a.is_thread_alive() for a in adapters)

  def test_multi_round_process_is_refused_with_a_clear_error(self, addresses):
    process = build_multi_round_process(
        tff.learning.algorithms.build_weighted_fed_avg(task.model_fn, _sgd()), 2
    )
    with multi_worker.multi_worker_execution_context(addresses=addresses):
      state = process.initialize()
      with pytest.raises(
          ValueError,
          match=r'(?s)cannot be split across TFF workers.*Detected one '
          r'aggregate dependent on another',
      ):
        process.next(state, [(d, d) for d in task.client_datasets()])

  def test_fewer_clients_than_workers(self, addresses):
    with multi_worker.multi_worker_execution_context(addresses=addresses):
      assert _sum_at_server([2.5]) == 2.5
      assert _sum_at_server([1.0, 2.0, 3.0]) == 6.0


def test_context_manager_cleans_up_on_exception(tmp_path):
  session_context = tff.framework.get_context_stack().current
  with pytest.raises(ZeroDivisionError, match='division by zero'):
    with multi_worker.multi_worker_execution_context(
        num_workers=2, log_dir=str(tmp_path)
    ) as context:
      assert tff.framework.get_context_stack().current is context
      started = [
          w
          for w in runtime.running_workers()
          if w.log_path.startswith(str(tmp_path))
      ]
      assert len(started) == 2
      assert _sum_at_server([1.0, 2.0, 3.0]) == 6.0
      _ = 1 / 0
  assert tff.framework.get_context_stack().current is session_context
  assert context.closed
  assert not any(a.is_thread_alive() for a in context.worker_contexts)
  assert not any(w.is_running() for w in started)
  assert not set(started) & set(runtime.running_workers())
  with pytest.raises(RuntimeError, match='is closed'):
    context.invoke(_sum_at_server, None)


def test_unreachable_address_fails_at_creation():
  address = f'localhost:{portpicker.pick_unused_port()}'
  start = time.monotonic()
  with pytest.raises(
      multi_worker.WorkerUnavailableError,
      match=f'TFF worker {address} is unreachable',
  ) as info:
    multi_worker.create_multi_worker_context([address], ready_timeout_seconds=1)
  assert info.value.address == address
  assert time.monotonic() - start < 30


def test_dead_worker_fails_with_its_address_within_bounded_time(tmp_path):
  workers = [
      runtime.start_local_worker(log_dir=str(tmp_path)) for _ in range(2)
  ]
  context = None
  try:
    context = multi_worker.create_multi_worker_context(
        [w.address for w in workers], reconnect_timeout_seconds=2
    )
    with tff.framework.get_context_stack().install(context):
      assert _sum_at_server([1.0, 2.0]) == 3.0
    workers[1].stop()
    # Bounded: a hang would fail here instead of hanging the test run.
    result, error = _invoke_with_deadline(
        context, lambda: _sum_at_server([1.0, 2.0]), timeout_seconds=90
    )
    assert result is None
    assert isinstance(error, multi_worker.WorkerUnavailableError), error
    assert error.address == workers[1].address
    assert f'TFF worker {workers[1].address} is unreachable' in str(error)
  finally:
    if context is not None:
      context.close()
    for worker in workers:
      worker.stop()


@pytest.mark.parametrize(
    'kwargs, message',
    [
        ({}, 'Pass exactly one of `num_workers` and `addresses`'),
        (
            {'num_workers': 2, 'addresses': ['localhost:1']},
            'Pass exactly one of `num_workers` and `addresses`',
        ),
        ({'num_workers': 0}, '`num_workers` must be an integer >= 1, got 0'),
        ({'addresses': []}, '`addresses` must name at least one TFF worker'),
        (
            {'addresses': 'localhost:1'},
            '`addresses` must be a sequence of "host:port" strings, got '
            "'localhost:1'",
        ),
    ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    with multi_worker.multi_worker_execution_context(**kwargs):
      pass
