"""Tests for benchmarks.model_families: the models the rows train.

The parameter counts are derived from the layer arithmetic (an embedding of
V ids and D dimensions holds V * D; an LSTM of H units on inputs of size D
holds 4 H (D + H + 1); a dense layer n_in * n_out + n_out), not read from
the code under test.
"""

import numpy as np
import pytest

from benchmarks import model_families


def _params(model):
  return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


@pytest.mark.parametrize(
    'name, expected',
    [
        # 320 + 18,496 + 1,179,776 + 7,998 (image_models_test).
        ('cnn', 1_206_590),
        # 10004 * 96 + 4 * 670 * (96 + 670 + 1) + 670 * 96 + 96
        # + 96 * 10004 + 10004 (text_test).
        ('word_lstm', 4_050_748),
        # 99 * 8 + 4 * 128 * (8 + 128 + 1) + 128 * 99 + 99.
        ('char_lstm', 792 + 70_144 + 12_771),
    ],
)
def test_family_models(name, expected):
  family = model_families.family(name)
  assert family.name == name
  assert _params(family.keras_fn()) == expected
  assert family.classification is (name == 'cnn')


@pytest.mark.parametrize(
    'name, num_ids, length',
    [('word_lstm', 10_004, 20), ('char_lstm', 99, 80)],
)
def test_sequence_clients(name, num_ids, length):
  family = model_families.family(name)
  data = family.client_data(3, 2, 4)
  assert len(data) == 3
  spec = family.model_fn().input_spec
  for dataset in data:
    batches = list(dataset.as_numpy_iterator())
    assert [b['x'].shape for b in batches] == [(4, length)] * 2
    for batch in batches:
      # y is x shifted by one id; no padding id (0) anywhere.
      np.testing.assert_array_equal(batch['x'][:, 1:], batch['y'][:, :-1])
      assert batch['x'].min() >= 1 and batch['y'].max() < num_ids
    assert dataset.element_spec['x'].dtype == spec['x'].dtype


def test_unknown_family_is_refused():
  with pytest.raises(ValueError, match=r"`name` must be one of \('cnn', "):
    model_families.family('rnn')


@pytest.mark.parametrize('name', ['cnn', 'word_lstm', 'char_lstm'])
def test_only_cnn_has_a_feature_model(name):
  family = model_families.family(name)
  if name != 'cnn':
    assert family.feature_model_fn is None
    return
  model = family.feature_model_fn()
  # FedFA's classifier is the last dense layer: 128 features -> 62 classes,
  # 128 * 62 + 62 = 7,998 weights; the features of a batch of 3 are 3 x 128.
  assert [tuple(v.shape) for v in model.classifier_variables] == [
      (128, 62),
      (62,),
  ]
  features = model.features(np.zeros((3, 28, 28, 1), np.float32), False)
  assert tuple(features.shape) == (3, 128)
