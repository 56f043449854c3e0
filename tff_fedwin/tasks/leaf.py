"""Task `leaf`: one's own LEAF directory, one client per LEAF user.

Reads LEAF's `preprocess.sh` output as it is (`tff_fedwin.data.leaf`),
converted once into a binary cache that later starts reuse
(`tff_fedwin.data.leaf_cache`); the workers build each client's dataset from
its id (`tff_fedwin.data.leaf_client_data`). The test split is pooled, as
the other tasks' test sets. Each kind's inputs, classes and model are in the
table of docs/data.md ("LEAF's JSON"); here, in addition:

* FEMNIST-style: `num_classes` sets the classes (else 1 + the largest
  label); `model` any of `image_models.IMAGE_MODELS` (`cnn_dropout`, of
  `tff_fedwin.tasks.emnist`, by default; `leaf_cnn` is LEAF's own CNN).
* Shakespeare-style: LEAF predicts ONE next character from 80; our
  character LSTM (`tff_fedwin.tasks.shakespeare`) has logits at every
  position, so the target sequence is padding at the first 79 positions and
  LEAF's next character at the last: the masked loss and accuracy
  (`pad_label=0`) score only the last position, LEAF's loss and accuracy.
* Synthetic-, Sent140-, CelebA- and Reddit-style: LEAF's models
  (`tff_fedwin.tasks.leaf_models`). Reddit's `pad_label` is its
  vocabulary's padding id, and the test accuracy leaves `<UNK>` targets
  out, as TFF's StackOverflow task does.

All checks (`check_leaf_dir`) run in plain Python and numpy while the cache
is written, before any TensorFlow or TFF work; `leaf_task` calls it first.
"""

import collections
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from tff_fedwin import checks
from tff_fedwin.data import from_ids
from tff_fedwin.data import leaf as leaf_data
from tff_fedwin.data import leaf_cache
from tff_fedwin.data import leaf_celeba
from tff_fedwin.data import leaf_client_data
from tff_fedwin.data import leaf_kinds
from tff_fedwin.data import leaf_sent140
from tff_fedwin.data import preloaded
from tff_fedwin.tasks import image_models
from tff_fedwin.tasks import leaf_models
from tff_fedwin.tasks import per_client
from tff_fedwin.tasks import shakespeare as shakespeare_lib
from tff_fedwin.tasks import task as task_lib

LeafDataError = leaf_data.LeafDataError
LeafOptions = leaf_kinds.LeafOptions
_NAMES = leaf_kinds.NAMES
DEFAULT_FEMNIST_MODEL = 'cnn_dropout'
FEMNIST_INPUT_SHAPE = (28, 28, 1)


def _femnist_model(model: Optional[str]) -> str:
  return DEFAULT_FEMNIST_MODEL if model in (None, 'auto') else model


def check_leaf_dir(
    data_dir: str,
    kind: str = 'auto',
    *,
    model: Optional[str] = None,
    cache_dir: Optional[str] = None,
    options: LeafOptions = LeafOptions(),
) -> leaf_cache.LeafCache:
  """Checks (and on the first start converts) a LEAF directory; no TF work.

  Args:
    data_dir: The LEAF directory (`train/*.json`, `test/*.json`).
    kind: 'auto' or one of `leaf.KINDS`.
    model: For FEMNIST-style data, one of `image_models.IMAGE_MODELS`, or
      None / 'auto' for `cnn_dropout`; Shakespeare-style data take None or
      'auto' only.
    cache_dir: Where the conversion lives (`leaf_cache.load_leaf_cache`).
    options: CelebA's images, Sent140's and Reddit's vocabulary, the
      evaluation folder (`LeafOptions`); each kind's own refused with
      another kind.

  Returns:
    The `leaf_cache.LeafCache` (its `class_counts` are each client's own).

  Raises:
    LeafDataError: One line naming the file, user and problem, a `model`
      given for data other than FEMNIST-style, or an option of another kind.
    image_models.ImageModelError: If `model` is not an image model.
  """
  if options.vocab_file and options.vocab_size is not None:
    raise LeafDataError(
        f'{options.vocab_file}: --vocab_size does not apply with '
        '--leaf_vocab_file (the file is the vocabulary)'
    )
  cache = preloaded.take(
      leaf_cache.load_leaf_cache, data_dir, kind, cache_dir, options
  )
  for name in set(options.given()) & set(_OPTIONS):
    flag, applies_to = _OPTIONS[name]
    if cache.kind not in applies_to:
      kinds = ' and '.join(_NAMES[k] for k in applies_to)
      raise LeafDataError(
          f'{data_dir}: {flag} applies to {kinds}-style LEAF data only; this '
          f'directory holds {_NAMES[cache.kind]}-style data'
      )
  if cache.kind == 'femnist':
    image_models.check_image_model(_femnist_model(model), FEMNIST_INPUT_SHAPE)
  elif model not in (None, 'auto'):
    own = _OWN_MODELS[cache.kind]
    raise LeafDataError(
        f'{data_dir}: --model={model} applies to FEMNIST-style LEAF data only; '
        f'this directory holds {_NAMES[cache.kind]}-style data ({own})'
    )
  return cache


# The model of each kind without --model.
_OWN_MODELS = {
    'shakespeare': 'the character LSTM',
    'synthetic': "LEAF's logistic regression",
    'sent140': "LEAF's stacked LSTM",
    'celeba': "LEAF's CNN",
    'reddit': "LEAF's stacked LSTM",
}
# `LeafOptions` field -> its flag, and the kinds it applies to.
_OPTIONS = {
    'images_dir': ('--leaf_images_dir', ('celeba',)),
    'vocab_file': ('--leaf_vocab_file', ('sent140', 'reddit')),
    'vocab_size': ('--vocab_size', ('sent140', 'reddit')),
}


# The kinds whose class count the labels decide (`_label_classes`).
LABELLED_KINDS = ('femnist', 'synthetic')


def _label_classes(cache: leaf_cache.LeafCache, num_classes: int) -> int:
  """1 + the largest label of both splits, or `num_classes` if set.

  FEMNIST-style and Synthetic-style rows (`LABELLED_KINDS`): the training
  labels' largest class counted in the cache's index, the test labels read
  from `test.y` (int32, 4 bytes an example). FEMNIST keeps 62 outputs when
  its labels reach 61, as LEAF's do; a 10-class set in its layout gets 10.

  Raises:
    ValueError: One line naming `--num_classes` if a label is out of range,
      or if it is set for another kind.
  """
  if cache.kind not in LABELLED_KINDS:
    if num_classes:
      raise ValueError(
          f'--num_classes sets the classes of FEMNIST- or Synthetic-style '
          f'rows; {cache.directory} holds {cache.kind}-style data, whose '
          'classes its kind decides.'
      )
    return cache.num_classes
  counted = np.flatnonzero(np.asarray(cache.class_counts).sum(axis=0))
  test_y = np.fromfile(os.path.join(cache.directory, 'test.y'), '<i4')
  largest = max(
      int(counted[-1]) if counted.size else 0,
      int(test_y.max()) if test_y.size else 0,
  )
  return task_lib.classes_of_labels(
      largest, num_classes, f'the LEAF directory of {cache.directory}'
  )


def _classifier(
    cache: leaf_cache.LeafCache,
    model: Optional[str],
    seed: int,
    num_classes: int,
):
  """The x spec and the Keras model builder of a one-label-per-example kind."""
  if cache.kind == 'synthetic':
    return tf.TensorSpec([None, cache.x_width], tf.float32), lambda: (
        leaf_models.synthetic_log_reg(cache.x_width, num_classes, seed)
    )
  if cache.kind == 'sent140':
    length = leaf_sent140.SEQ_LENGTH
    return tf.TensorSpec([None, length], tf.int32), lambda: (
        leaf_models.sent140_stacked_lstm(
            cache.vocab_size - 1, length, cache.num_classes, seed
        )
    )
  if cache.kind == 'celeba':
    size = leaf_celeba.IMAGE_SIZE
    return tf.TensorSpec([None, size, size, 3], tf.float32), lambda: (
        leaf_models.celeba_cnn(size, cache.num_classes, seed)
    )
  name = _femnist_model(model)
  return tf.TensorSpec([None, *FEMNIST_INPUT_SHAPE], tf.float32), lambda: (
      image_models.create_image_model(
          name, FEMNIST_INPUT_SHAPE, num_classes, seed
      )
  )


def _last_target(element):
  """LEAF's next character as the last of 80 targets, padding before it."""
  y = tf.concat(
      [
          tf.fill([leaf_data.SHAKESPEARE_SEQ_LENGTH - 1], leaf_data.PAD_ID),
          tf.reshape(element['y'], [1]),
      ],
      axis=0,
  )
  return collections.OrderedDict(x=element['x'], y=y)


def leaf_task(
    data_dir: str,
    *,
    kind: str = 'auto',
    model: Optional[str] = None,
    batch_size: int,
    epochs: int,
    seed: int,
    cache_dir: Optional[str] = None,
    eval_batch_size: int = 1000,
    shuffle_buffer: Optional[int] = None,
    options: LeafOptions = LeafOptions(),
    num_classes: int = 0,
) -> task_lib.Task:
  """The `Task` of a LEAF directory (see the module docstring).

  Args:
    data_dir: The LEAF directory (`train/*.json`, `test/*.json`).
    kind: 'auto' (recognized from the data) or one of `leaf.KINDS`.
    model: FEMNIST-style only: one of `image_models.IMAGE_MODELS`; None or
      'auto' for `cnn_dropout`.
    batch_size: Client batch size.
    epochs: Local epochs per round.
    seed: Seed of the client shuffling and the model initialization.
    cache_dir: Where the binary conversion lives; None for
      `leaf_cache.default_cache_dir()`. The workers read it.
    eval_batch_size: Batch size of the test set.
    shuffle_buffer: The clients' shuffle buffer (`task.batching_fn`).
    options: As for `check_leaf_dir`.
    num_classes: FEMNIST- and Synthetic-style rows: the classifier's
      outputs; 0: 1 + the largest label of both splits (`_label_classes`).

  Returns:
    A `Task` named 'leaf' of the directory's kind (module docstring; the
    examples' arrays: `tff_fedwin.data.leaf`). `train_data` builds each
    client's dataset from its id.

  Raises:
    LeafDataError: see `check_leaf_dir`, before any TensorFlow work.
    image_models.ImageModelError: If `model` is not an image model.
    ValueError: If `batch_size`, `epochs` or `eval_batch_size` is not a
      positive integer.
  """
  for name, value in (
      ('batch_size', batch_size),
      ('epochs', epochs),
      ('eval_batch_size', eval_batch_size),
  ):
    checks.check_int(name, value, minimum=1)
  cache = check_leaf_dir(
      data_dir, kind, model=model, cache_dir=cache_dir, options=options
  )
  client_data = leaf_client_data.LeafClientData(cache)
  test_data = leaf_client_data.test_dataset(cache)
  test_clients = per_client.TestClients.from_counts(
      [user for user, _ in cache.test_users],
      [n for _, n in cache.test_users],
  )
  classes = _label_classes(cache, num_classes)
  train_data, pad, excluded = client_data, None, ()
  if cache.kind == 'reddit':
    length, pad, excluded = cache.x_width, cache.pad_id, (cache.unknown_id,)
    classes = cache.vocab_size
    model_fn = task_lib.sequence_model_fn(
        lambda: leaf_models.reddit_stacked_lstm(classes, length, seed),
        length,
        pad,
        excluded,
    )
  elif cache.kind == 'shakespeare':
    length, pad = leaf_data.SHAKESPEARE_SEQ_LENGTH, leaf_data.PAD_ID
    classes = leaf_data.SHAKESPEARE_VOCAB_SIZE
    model_fn = task_lib.sequence_model_fn(
        lambda: shakespeare_lib.create_char_model(
            classes, seq_length=length, seed=seed
        ),
        length,
        pad,
    )
    train_data = from_ids.datasets_from_ids(
        client_data.preprocess(lambda ds: ds.map(_last_target))
    )
    test_data = test_data.map(_last_target)
  else:
    x_spec, keras_fn = _classifier(cache, model, seed, classes)
    model_fn = task_lib.classification_model_fn(
        keras_fn,
        collections.OrderedDict(x=x_spec, y=tf.TensorSpec([None], tf.int32)),
    )
  return task_lib.Task(
      'leaf',
      model_fn,
      train_data,
      task_lib.batching_fn(batch_size, epochs, seed, shuffle_buffer),
      test_data.batch(eval_batch_size),
      classes,
      pad_label=pad,
      accuracy_excluded_labels=excluded,
      test_clients=test_clients,
      data_kind=cache.kind,
  )
