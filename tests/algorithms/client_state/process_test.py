"""Tests for `build_scaffold`: types, and rounds vs the numpy SCAFFOLD of
`scaffold_reference` (Karimireddy et al. 2020, Alg. 1, option II).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin import training
from tff_fedwin.algorithms import runners
from tff_fedwin.algorithms import scaffold


@pytest.fixture(scope='module')
def build_process():
  """Builds each process configuration once per module."""
  return sref.process_builder()


class TestBuildScaffoldComputation:
  """Type signatures and static properties of the computations."""

  def test_next_type_signature_places_state_data_and_client_states(
      self,
      build_process,
  ):
    process = build_process()
    param = process.next.type_signature.parameter
    result = process.next.type_signature.result
    state_type = process.initialize.type_signature.result
    weights_type = tff.learning.models.weights_type_from_model(sref.model_fn)
    client_state_type = tff.types.to_type(
        scaffold.ScaffoldClientState(control_variate=weights_type.trainable)
    )

    assert isinstance(process, tff.templates.IterativeProcess)
    tff.test.assert_types_identical(param[0], state_type)
    tff.test.assert_types_identical(
        state_type.member.global_model_weights, weights_type
    )
    tff.test.assert_types_identical(
        param[1],
        tff.FederatedType(
            tff.SequenceType(tff.types.tensorflow_to_type(sref.INPUT_SPEC)),
            tff.CLIENTS,
        ),
    )
    tff.test.assert_types_identical(
        param[2], tff.FederatedType(client_state_type, tff.CLIENTS)
    )
    tff.test.assert_types_identical(result[0], state_type)
    tff.test.assert_types_identical(result[1], param[2])
    tff.test.assert_types_identical(
        result[2],
        tff.FederatedType(
            tff.to_type(
                collections.OrderedDict(
                    train_loss=np.float32,
                    num_examples=np.int64,
                    num_clients_with_data=np.int32,
                )
            ),
            tff.SERVER,
        ),
    )

  def test_files_next_takes_file_prefixes_and_returns_no_client_states(
      self, build_process
  ):
    values = build_process().next.type_signature
    files = build_process(client_state_transfer='files').next.type_signature
    # Same state and data in, a string (the client's file prefix) instead of
    # its state; the same state and metrics out, no client states.
    tff.test.assert_types_identical(files.parameter[0], values.parameter[0])
    tff.test.assert_types_identical(files.parameter[1], values.parameter[1])
    tff.test.assert_types_identical(
        files.parameter[2], tff.FederatedType(np.str_, tff.CLIENTS)
    )
    assert len(files.result) == 2
    tff.test.assert_types_identical(files.result[0], values.result[0])
    tff.test.assert_types_identical(files.result[1], values.result[2])

  @pytest.mark.parametrize('window_size', [None, 2])
  def test_get_model_weights_maps_server_state_to_model_weights(
      self, build_process, window_size
  ):
    process = build_process(window_size=window_size)
    state_type = process.initialize.type_signature.result.member
    weights_type = tff.learning.models.weights_type_from_model(sref.model_fn)

    assert isinstance(process, scaffold.ScaffoldProcess)
    tff.test.assert_types_identical(
        process.get_model_weights.type_signature,
        tff.FunctionType(state_type, weights_type),
    )

  def test_process_rejects_get_model_weights_of_another_type(
      self, build_process
  ):
    process = build_process()
    other = tff.tensorflow.computation(lambda x: x, np.float32)

    with pytest.raises(TypeError, match='get_model_weights_fn'):
      scaffold.ScaffoldProcess(process.initialize, process.next, other)

  def test_aggregates_with_plain_sums_only(self, build_process):
    process = build_process()
    # `initialize` aggregates nothing; `next` sums the clients' values with
    # `federated_sum` (no secure aggregation).
    tff.test.assert_not_contains_unsecure_aggregation(process.initialize)
    tff.test.assert_contains_unsecure_aggregation(process.next)
    tff.test.assert_not_contains_secure_aggregation(process.next)


class TestBuildScaffoldExecution:
  """Rounds vs the numpy SCAFFOLD."""

  def test_initialize_uses_model_weights_and_zero_control_variate(
      self, build_process
  ):
    state = build_process().initialize()

    assert isinstance(state, scaffold.ScaffoldServerState)
    weights = scaffold.model_weights_to_evaluate(state)
    assert isinstance(weights, tff.learning.models.ModelWeights)
    sref.assert_close(weights.trainable, sref.np_initial_params())
    assert list(weights.non_trainable) == []
    sref.assert_close(state.control_variate, sref.np_zeros())
    assert state.round_num == 0

  @pytest.mark.parametrize(
      'server_learning_rate,loop,transfer',
      [
          (1.0, tff.learning.LoopImplementation.DATASET_ITERATOR, 'values'),
          (0.5, tff.learning.LoopImplementation.DATASET_ITERATOR, 'values'),
          (1.0, tff.learning.LoopImplementation.DATASET_REDUCE, 'values'),
          (0.5, tff.learning.LoopImplementation.DATASET_ITERATOR, 'files'),
      ],
  )
  def test_rounds_match_numpy_scaffold(
      self, build_process, server_learning_rate, loop, transfer, tmp_path
  ):
    process = build_process(
        server_learning_rate,
        loop_implementation=loop,
        client_state_transfer=transfer,
    )
    assert process.client_state_transfer == transfer
    store = training.ClientStateStore(
        scaffold.initial_client_state(sref.model_fn)
    )
    # The runner writes and reads the client state files of a 'files'
    # process (the driver's side); with 'values' it is process.next.
    runner = runners.ScaffoldRunner(
        process,
        scaffold.initial_client_state(sref.model_fn),
        state_files_dir=str(tmp_path) if transfer == 'files' else None,
    )
    state = process.initialize()
    np_params = sref.np_initial_params()
    np_control = sref.np_zeros()
    np_client_controls = [sref.np_zeros() for _ in range(sref.TOTAL_CLIENTS)]

    for round_num, sampled in enumerate(sref.SAMPLING_SCHEDULE, start=1):
      sampled_ids = [sref.CLIENT_IDS[i] for i in sampled]
      unsampled = [i for i in range(sref.TOTAL_CLIENTS) if i not in sampled]
      before = {i: store.get([sref.CLIENT_IDS[i]])[0] for i in unsampled}
      state, new_client_states, metrics = runner.run_round(
          state,
          [sref.make_dataset(sref.CLIENT_DATA[i]) for i in sampled],
          store.get(sampled_ids),
      )
      store.update(sampled_ids, new_client_states)

      results = [
          sref.np_client_update(
              np_params, np_control, np_client_controls[i], sref.CLIENT_DATA[i]
          )
          for i in sampled
      ]
      np_params, np_control = sref.np_server_update(
          np_params, np_control, results, server_learning_rate
      )
      for i, r in zip(sampled, results):
        np_client_controls[i] = r.new_control

      assert state.round_num == round_num
      sref.assert_close(
          scaffold.model_weights_to_evaluate(state).trainable, np_params
      )
      sref.assert_close(process.get_model_weights(state).trainable, np_params)
      sref.assert_close(state.control_variate, np_control)
      for i in range(sref.TOTAL_CLIENTS):
        (client_state,) = store.get([sref.CLIENT_IDS[i]])
        sref.assert_close(client_state.control_variate, np_client_controls[i])
      for i, old in before.items():
        (client_state,) = store.get([sref.CLIENT_IDS[i]])
        for new_leaf, old_leaf in zip(
            client_state.control_variate, old.control_variate
        ):
          np.testing.assert_array_equal(new_leaf, old_leaf)
      # c stays the mean of all N client control variates.
      mean_client_control = [
          np.mean(
              [
                  store.get([cid])[0].control_variate[j]
                  for cid in sref.CLIENT_IDS
              ],
              axis=0,
          )
          for j in range(2)
      ]
      sref.assert_close(state.control_variate, mean_client_control)
      assert metrics['num_examples'] == sum(r.num_examples for r in results)
      assert metrics['num_clients_with_data'] == len(sampled)
      np.testing.assert_allclose(
          metrics['train_loss'],
          sum(r.loss_sum for r in results)
          / sum(r.num_examples for r in results),
          rtol=1e-5,
      )

  def test_round_with_an_empty_client_ignores_it(self, build_process):
    process = build_process()
    params = sref.np_initial_params()
    server_control = sref.nonzero_controls(1)
    client_controls = [sref.nonzero_controls(2), sref.nonzero_controls(3)]
    data = [sref.EMPTY_DATA, sref.CLIENT_DATA[1]]

    state, new_client_states, metrics = process.next(
        sref.make_server_state(params, server_control),
        [sref.make_dataset(d) for d in data],
        [sref.make_client_state(c) for c in client_controls],
    )

    results = [
        sref.np_client_update(params, server_control, c, d)
        for c, d in zip(client_controls, data)
    ]
    expected_params, expected_control = sref.np_server_update(
        params, server_control, results, 1.0
    )
    sref.assert_close(state.global_model_weights.trainable, expected_params)
    sref.assert_close(state.control_variate, expected_control)
    sref.assert_close(new_client_states[0].control_variate, client_controls[0])
    sref.assert_close(
        new_client_states[1].control_variate, results[1].new_control
    )
    assert metrics['num_clients_with_data'] == 1
    assert metrics['num_examples'] == len(sref.CLIENT_DATA[1][1])
    assert np.isfinite(metrics['train_loss'])

  def test_round_with_only_empty_clients_changes_nothing(self, build_process):
    process = build_process()
    params = sref.np_initial_params()
    server_control = sref.nonzero_controls(1)
    client_controls = [sref.nonzero_controls(2), sref.nonzero_controls(3)]

    state, new_client_states, metrics = process.next(
        sref.make_server_state(params, server_control, round_num=3),
        [
            sref.make_dataset(sref.EMPTY_DATA),
            sref.make_dataset(sref.EMPTY_DATA),
        ],
        [sref.make_client_state(c) for c in client_controls],
    )

    sref.assert_close(state.global_model_weights.trainable, params)
    sref.assert_close(state.control_variate, server_control)
    for new_state, control in zip(new_client_states, client_controls):
      sref.assert_close(new_state.control_variate, control)
    assert state.round_num == 4
    assert metrics['num_clients_with_data'] == 0
    assert metrics['num_examples'] == 0
    assert metrics['train_loss'] == 0.0

  @pytest.mark.parametrize(
      'data, expected_count',
      [
          # Counter starts at 10; the clients count 6 and 5 examples; the empty
          # client is ignored: 10 + (6 + 5) / 2.
          ((sref.CLIENT_DATA[0], sref.CLIENT_DATA[1], sref.EMPTY_DATA), 15.5),
          ((sref.EMPTY_DATA, sref.EMPTY_DATA), 10.0),
      ],
  )
  def test_non_trainable_weights_are_averaged_over_clients_with_data(
      self, build_process, data, expected_count
  ):
    process = build_process(with_counter=True)
    params = sref.np_initial_params()
    client_control = sref.np_zeros()

    state, _, _ = process.next(
        sref.make_server_state(params, sref.np_zeros(), non_trainable=[10.0]),
        [sref.make_dataset(d) for d in data],
        [sref.make_client_state(client_control) for _ in data],
    )

    sref.assert_close(
        state.global_model_weights.non_trainable, [expected_count]
    )

  def test_rounds_with_wsm_match_numpy_scaffold(self, build_process):
    process = build_process(client_loss='wsm', num_classes=sref.NUM_CLASSES)
    rounds = len(sref.SAMPLING_SCHEDULE)
    expected = sref.np_simulate(rounds, client_loss='wsm')

    for t, state, store, _ in sref.run_rounds(process, rounds):
      sref.assert_round_matches(
          t, state, store, expected[t - 1], with_window=False, process=process
      )

  def test_rounds_with_wsm_report_plain_cross_entropy(self, build_process):
    process = build_process(client_loss='wsm', num_classes=sref.NUM_CLASSES)
    rounds = 2
    expected = sref.np_simulate(rounds, client_loss='wsm')

    for t, _, _, metrics in sref.run_rounds(process, rounds):
      np.testing.assert_allclose(
          metrics['train_loss'],
          expected[t - 1].train_loss,
          rtol=1e-5,
          err_msg=f'round {t}',
      )
      assert metrics['num_examples'] == expected[t - 1].num_examples


class TestBuildScaffoldArguments:
  """Argument checks: each error names the argument."""

  @pytest.mark.parametrize(
      'kwargs, error, argument',
      [
          (dict(client_loss='mse'), ValueError, 'client_loss'),
          (dict(client_loss=None), ValueError, 'client_loss'),
          (dict(client_loss='wsm'), ValueError, 'num_classes'),
          (dict(client_loss='wsm', num_classes=0), ValueError, 'num_classes'),
          (dict(client_loss='wsm', num_classes=2.0), ValueError, 'num_classes'),
          (dict(window_size=0), ValueError, 'window_size'),
          (dict(window_size=2.5), ValueError, 'window_size'),
          (dict(window_size=2, window_mode='ima'), ValueError, 'window_mode'),
          (
              dict(window_size=2, window_start_round=-1),
              ValueError,
              'window_start_round',
          ),
          (
              dict(window_size=2, window_start_round=1.0),
              ValueError,
              'window_start_round',
          ),
      ],
  )
  def test_build_rejects_bad_loss_and_window_arguments(
      self, kwargs, error, argument
  ):
    with pytest.raises(error, match=argument):
      scaffold.build_scaffold(
          sref.model_fn, client_learning_rate=0.1, total_clients=4, **kwargs
      )

  def test_build_with_wsm_rejects_non_integer_labels(self):
    float_labels = collections.OrderedDict(
        x=sref.INPUT_SPEC['x'], y=tf.TensorSpec([None], tf.float32)
    )

    with pytest.raises(ValueError, match='integer'):
      scaffold.build_scaffold(
          lambda: sref.model_fn(input_spec=float_labels),
          client_learning_rate=0.1,
          total_clients=4,
          client_loss='wsm',
          num_classes=sref.NUM_CLASSES,
      )

  @pytest.mark.parametrize(
      'kwargs, argument',
      [
          (dict(client_learning_rate=0.0), 'client_learning_rate'),
          (dict(client_learning_rate=-0.1), 'client_learning_rate'),
          (dict(server_learning_rate=0.0), 'server_learning_rate'),
          (dict(total_clients=0), 'total_clients'),
          (dict(total_clients=2.5), 'total_clients'),
          (dict(loop_implementation='iterator'), 'loop_implementation'),
          (dict(client_state_transfer='disk'), 'client_state_transfer'),
      ],
  )
  def test_build_rejects_bad_arguments(self, kwargs, argument):
    arguments = dict(
        client_learning_rate=0.1, server_learning_rate=1.0, total_clients=4
    )
    arguments.update(kwargs)

    with pytest.raises(ValueError, match=argument):
      scaffold.build_scaffold(sref.model_fn, **arguments)

  def test_get_model_weights_rejects_other_values(self):
    with pytest.raises(ValueError, match='`state`'):
      scaffold.model_weights_to_evaluate(({}, [], 0))
