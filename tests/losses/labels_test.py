"""Tests for tff_fedwin.losses.labels: the one label lookup."""

import collections

import pytest
import tensorflow as tf

from tff_fedwin import losses

_X = tf.TensorSpec([None, 2], tf.float32)
_Y = tf.TensorSpec([None], tf.int32)


def test_batch_labels_of_mapping_and_tuple_batches():
  batch = collections.OrderedDict(x='features', y='labels', z='other')
  assert losses.batch_labels(batch) == 'labels'
  assert losses.batch_labels(batch, 'z') == 'other'
  assert losses.batch_labels(('features', 'labels')) == 'labels'


@pytest.mark.parametrize(
    'spec', [collections.OrderedDict(x=_X, y=_Y), (_X, _Y), [_X, _Y]]
)
def test_integer_label_spec_finds_the_labels(spec):
  assert losses.integer_label_spec(spec) == _Y


@pytest.mark.parametrize(
    'spec, label_key, error, match',
    [
        (collections.OrderedDict(x=_X, y=_Y), 'label', KeyError, 'label'),
        ((_X,), 'y', TypeError, 'mappings'),
        (_X, 'y', TypeError, 'mappings'),
        ((_X, tf.TensorSpec([None], tf.float32)), 'y', TypeError, 'integer'),
    ],
)
def test_integer_label_spec_rejects(spec, label_key, error, match):
  with pytest.raises(error, match=match):
    losses.integer_label_spec(spec, label_key)
