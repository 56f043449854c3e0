"""Tests for the SCAFFOLD client step, against the numpy SCAFFOLD of
`scaffold_reference` (Karimireddy et al. 2020, Alg. 1, option II).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import scaffold_reference as sref
from tff_fedwin.algorithms import client_loop
from tff_fedwin.algorithms import scaffold
from tff_fedwin.algorithms.client_state import client

LOOPS = client_loop.LOOP_FORMS
LOSS_LOOPS = [(loss, loop) for loss in ('ce', 'wsm') for loop in LOOPS]


def _scaffold_client_update(model_fn, client_learning_rate, **client_args):
  """SCAFFOLD's client step: `client_update(x, c, ClientState(c_i), dataset)
  -> (ClientState(c_i+), ClientResult)` (Alg. 1, lines 9-13, option II)."""
  return client.build_client_update(
      model_fn, scaffold.Scaffold(), client_learning_rate, **client_args
  )


class TestBuildScaffoldClientUpdateExecution:
  """The client step as a plain `tf.function`, vs numpy."""

  @pytest.mark.parametrize('client_loss,loop', LOSS_LOOPS)
  @pytest.mark.parametrize('client_index', range(sref.TOTAL_CLIENTS))
  @pytest.mark.parametrize('zero_controls', [True, False])
  def test_client_update_matches_numpy(
      self, client_loss, client_index, zero_controls, loop
  ):
    params = sref.np_initial_params()
    server_control = (
        sref.np_zeros() if zero_controls else sref.nonzero_controls(1)
    )
    client_control = (
        sref.np_zeros() if zero_controls else sref.nonzero_controls(2)
    )
    client_update = _scaffold_client_update(
        sref.model_fn,
        sref.CLIENT_LEARNING_RATE,
        client_loss=client_loss,
        num_classes=sref.NUM_CLASSES if client_loss == 'wsm' else None,
        loop_implementation=loop,
    )

    new_state, result = client_update(
        tff.learning.models.ModelWeights(
            trainable=[tf.constant(p, tf.float32) for p in params],
            non_trainable=[],
        ),
        [tf.constant(c, tf.float32) for c in server_control],
        sref.make_client_state(client_control),
        sref.make_dataset(sref.CLIENT_DATA[client_index]),
    )

    expected = sref.np_client_update(
        params,
        server_control,
        client_control,
        sref.CLIENT_DATA[client_index],
        client_loss=client_loss,
    )
    sref.assert_close(result.model_delta, expected.model_delta)
    sref.assert_close(result.control_variate_delta, expected.control_delta)
    sref.assert_close(new_state.control_variate, expected.new_control)
    assert result.client_weight.numpy() == 1.0
    assert result.num_examples.numpy() == expected.num_examples
    # loss_sum always uses the model's plain cross-entropy (also with WSM).
    np.testing.assert_allclose(
        result.loss_sum.numpy(), expected.loss_sum, rtol=1e-5
    )

  @pytest.mark.parametrize('loop', LOOPS)
  def test_client_update_on_empty_dataset_changes_nothing(self, loop):
    client_control = sref.nonzero_controls(2)
    client_update = _scaffold_client_update(
        sref.model_fn, sref.CLIENT_LEARNING_RATE, loop_implementation=loop
    )

    new_state, result = client_update(
        tff.learning.models.ModelWeights(
            trainable=[
                tf.constant(p, tf.float32) for p in sref.np_initial_params()
            ],
            non_trainable=[],
        ),
        [tf.constant(c, tf.float32) for c in sref.nonzero_controls(1)],
        sref.make_client_state(client_control),
        sref.make_dataset(sref.EMPTY_DATA),
    )

    sref.assert_close(result.model_delta, sref.np_zeros())
    sref.assert_close(result.control_variate_delta, sref.np_zeros())
    sref.assert_close(new_state.control_variate, client_control)
    assert result.client_weight.numpy() == 0.0
    assert result.num_examples.numpy() == 0
    assert result.loss_sum.numpy() == 0.0

  def test_wsm_test_data_has_clients_with_absent_classes(self):
    # So that the WSM tests below exercise the beta_c = 0 masking.
    counts = [
        np.bincount(y, minlength=sref.NUM_CLASSES)
        for _, y, _ in sref.CLIENT_DATA
    ]
    assert any((c == 0).any() for c in counts)
    assert any((c > 0).all() for c in counts)

  def test_client_update_with_wsm_reports_plain_cross_entropy(self):
    client_update = _scaffold_client_update(
        sref.model_fn,
        sref.CLIENT_LEARNING_RATE,
        client_loss='wsm',
        num_classes=sref.NUM_CLASSES,
    )

    _, result = client_update(
        tff.learning.models.ModelWeights(
            trainable=[
                tf.constant(p, tf.float32) for p in sref.np_initial_params()
            ],
            non_trainable=[],
        ),
        [tf.constant(c, tf.float32) for c in sref.np_zeros()],
        sref.make_client_state(sref.np_zeros()),
        sref.make_dataset(sref.CLIENT_DATA[0]),
    )

    # loss_sum: sum over batches of (plain CE on raw logits, before the step)
    # * batch size, along the WSM trajectory.
    expected = sref.np_client_update(
        sref.np_initial_params(),
        sref.np_zeros(),
        sref.np_zeros(),
        sref.CLIENT_DATA[0],
        client_loss='wsm',
    )
    assert result.num_examples.numpy() == expected.num_examples
    np.testing.assert_allclose(
        result.loss_sum.numpy(), expected.loss_sum, rtol=1e-5
    )

  def test_client_update_with_wsm_reads_labels_of_tuple_batches(self):
    tuple_spec = (sref.INPUT_SPEC['x'], sref.INPUT_SPEC['y'])
    x, y, batch_size = sref.CLIENT_DATA[0]
    client_update = _scaffold_client_update(
        lambda: sref.model_fn(input_spec=tuple_spec),
        sref.CLIENT_LEARNING_RATE,
        client_loss='wsm',
        num_classes=sref.NUM_CLASSES,
    )

    _, result = client_update(
        tff.learning.models.ModelWeights(
            trainable=[
                tf.constant(p, tf.float32) for p in sref.np_initial_params()
            ],
            non_trainable=[],
        ),
        [tf.constant(c, tf.float32) for c in sref.np_zeros()],
        sref.make_client_state(sref.np_zeros()),
        tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size),
    )

    expected = sref.np_client_update(
        sref.np_initial_params(),
        sref.np_zeros(),
        sref.np_zeros(),
        sref.CLIENT_DATA[0],
        client_loss='wsm',
    )
    sref.assert_close(result.model_delta, expected.model_delta)


class TestOptionIIControlVariate:
  """c_i+ = c_i - c + (x - y) / (K lr), by hand."""

  def test_after_k_steps(self):
    new = scaffold.option_ii_control_variate(
        [tf.constant([1.0, 2.0])],
        [tf.constant([0.5, -0.5])],
        [tf.constant([0.2, 0.4])],
        tf.constant(2, tf.int64),
        0.1,
    )
    # [1 - 0.5 + 0.2 / 0.2, 2 + 0.5 + 0.4 / 0.2].
    sref.assert_close(new, [[1.5, 4.5]])

  def test_without_steps_keeps_the_client_control_variate(self):
    new = scaffold.option_ii_control_variate(
        [tf.constant([1.0, 2.0])],
        [tf.constant([0.5, -0.5])],
        [tf.constant([0.0, 0.0])],
        tf.constant(0, tf.int64),
        0.1,
    )
    sref.assert_close(new, [[1.0, 2.0]])


class TestBuildScaffoldClientUpdateArguments:

  @pytest.mark.parametrize('client_loss', ['mse', 'WSM'])
  def test_client_update_rejects_unknown_client_loss(self, client_loss):
    with pytest.raises(ValueError, match='client_loss.*ce, wsm'):
      _scaffold_client_update(sref.model_fn, 0.1, client_loss=client_loss)


class TestInitialClientState:

  def test_initial_client_state_is_zeros_of_trainable_weights(self):
    state = scaffold.initial_client_state(sref.model_fn)

    assert isinstance(state, scaffold.ScaffoldClientState)
    assert [c.shape for c in state.control_variate] == [
        (sref.NUM_FEATURES, sref.NUM_CLASSES),
        (sref.NUM_CLASSES,),
    ]
    assert all(c.dtype == np.float32 for c in state.control_variate)
    sref.assert_close(state.control_variate, sref.np_zeros())
