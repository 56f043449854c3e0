"""Tests for tff_fedwin.tasks.task: the client cap (`with_max_elements`)."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tests import script_runs
from tff_fedwin.experiments import run as run_lib
from tff_fedwin.tasks import task as task_lib
from tff_fedwin.training import sampling


def _task(preprocess_fn):
  return task_lib.Task('t', None, None, preprocess_fn, None, 10)


def _batches(dataset):
  return [b['x'].tolist() for b in dataset.as_numpy_iterator()]


def _numbers(n):
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=np.arange(n, dtype=np.int32))
  )


def test_cap_is_the_first_examples_after_the_epochs_before_batching():
  # No shuffle (a buffer of 1), 10 examples, 2 epochs: the stream is 0..9,
  # 0..9; its first 13 in batches of 4: [0-3], [4-7], [8, 9, 0, 1], [2].
  task = _task(task_lib.batching_fn(4, 2, seed=0, shuffle_buffer=1))
  capped = task_lib.with_max_elements(task, 13, batch_size=4)
  assert _batches(capped.preprocess_fn(_numbers(10))) == [
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9, 0, 1],
      [2],
  ]


def test_cap_equals_tffs_client_spec_order_with_a_shuffle():
  # tff.simulation.baselines' preprocessing with ClientSpec(max_elements=7):
  # shuffle, repeat(epochs), take(max_elements), batch.
  task = _task(task_lib.batching_fn(3, 2, seed=5))
  capped = task_lib.with_max_elements(task, 7, batch_size=3)
  tffs = _numbers(10).shuffle(1000, seed=5).repeat(2).take(7).batch(3)
  assert _batches(capped.preprocess_fn(_numbers(10))) == _batches(tffs)
  assert [len(b) for b in _batches(tffs)] == [3, 3, 1]


def test_cap_passes_a_rounds_epochs_on_only_where_they_are_taken():
  # batching_fn(4, 3) without a shuffle; the round asks 1 epoch of 10, cap 13.
  capped = task_lib.with_max_elements(
      _task(task_lib.batching_fn(4, 3, seed=0, shuffle_buffer=1)), 13, 4
  )
  assert _batches(capped.preprocess_fn(_numbers(10), epochs=1)) == [
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
  ]
  # A preprocessing without `epochs` (TFF's baselines'): the cap takes none.
  own = task_lib.with_max_elements(
      _task(lambda dataset, shuffle_seed=None: dataset.batch(4)), 13, 4
  )
  assert not sampling.takes_epochs(own.preprocess_fn)
  assert sampling.takes_epochs(capped.preprocess_fn)


@pytest.mark.parametrize(
    'buffer, expected',
    [
        (1, list(range(10))),  # No shuffle: the client's order.
        (None, None),  # The default buffer of 1000: TF's seeded shuffle.
        (3, None),
    ],
)
def test_shuffle_buffer(buffer, expected):
  batches = _batches(
      task_lib.batching_fn(10, 1, seed=5, shuffle_buffer=buffer)(_numbers(10))
  )
  size = 1000 if buffer is None else buffer
  tfs = _batches(_numbers(10).shuffle(size, seed=5).batch(10))
  assert batches == ([expected] if expected else tfs)
  assert sorted(batches[0]) == list(range(10))


@pytest.mark.parametrize(
    'flags, expected',
    [
        ([], (96, 670, 1000)),
        (['--text_model=small', '--client_shuffle_buffer=1'], (32, 128, 1)),
    ],
)
def test_text_flags_reach_the_task(flags, expected):
  # The model's embedding and LSTM sizes, and whether alice's 24 training
  # examples keep their order (a buffer of 1) or not.
  config = script_runs.config_from_args(
      [
          '--task=text',
          '--data_jsonl=tff_fedwin/data/samples/text_sample.jsonl',
          '--clients_per_round=2',
          '--client_batch_size=24',
          *flags,
      ]
  )
  task = run_lib.create_task(config)
  keras_model = task.model_fn()._keras_model  # pylint: disable=protected-access
  embedding = keras_model.layers[1].output_dim
  lstm = keras_model.layers[2].units
  client = task.train_data.create_tf_dataset_for_client('alice')
  (batch,) = list(task.preprocess_fn(client).as_numpy_iterator())
  unshuffled = np.stack([e['x'] for e in client.as_numpy_iterator()])
  in_order = np.array_equal(batch['x'], unshuffled)
  assert (embedding, lstm, 1 if in_order else 1000) == expected


@pytest.mark.parametrize(
    'flags, num_ids',
    [
        # words: 'the', 'cat', '.' (V = 3) + pad, OOV, BOS, EOS.
        ([], 7),
        # whitespace: 'The', 'cat.', 'the', 'CAT' (V = 4) + 4.
        (['--text_tokenizer=whitespace'], 8),
    ],
)
def test_text_tokenizer_flag_reaches_the_vocabulary(tmp_path, flags, num_ids):
  path = tmp_path / 'raw.jsonl'
  path.write_text(
      '{"client_id": "a", "text": "The cat.", "split": "train"}\n'
      '{"client_id": "b", "text": "the CAT", "split": "train"}\n'
      '{"client_id": "b", "text": "cat", "split": "test"}\n'
  )
  config = script_runs.config_from_args(
      ['--task=text', f'--data_jsonl={path}', '--clients_per_round=2', *flags]
  )
  assert run_lib.create_task(config).num_classes == num_ids


def test_no_cap_is_the_task_itself():
  task = _task(task_lib.batching_fn(4, 1, seed=0))
  assert task_lib.with_max_elements(task, 0, batch_size=4) is task


@pytest.mark.parametrize('cap, expected', [(0, 24), (4, 4)])
def test_the_flag_caps_every_sampled_client(cap, expected):
  # The sample text's client 'alice' has 30 texts, no split: the last
  # floor(0.2 * 30) = 6 are test, 24 train, one word-level example each (at
  # most 20 words a text); 4 with --client_max_elements=4.
  config = script_runs.config_from_args(
      [
          '--task=text',
          '--data_jsonl=tff_fedwin/data/samples/text_sample.jsonl',
          '--clients_per_round=2',
          f'--client_max_elements={cap}',
          '--client_batch_size=2',
      ]
  )
  task = run_lib.create_task(config)
  client = task.train_data.create_tf_dataset_for_client('alice')
  batches = list(task.preprocess_fn(client).as_numpy_iterator())
  assert sum(len(b['y']) for b in batches) == expected
