"""The options of `tasks.registry.create_task`, one typed record."""

from typing import NamedTuple, Optional

from tff_fedwin import choices
from tff_fedwin.tasks import leaf as leaf_lib


class TaskOptions(NamedTuple):
  """What the task builders read; each reads the fields of its task.

  Attributes:
    batch_size: Client batch size.
    epochs: Local epochs per round.
    seed: Seed of the partition, shuffling and model initialization.
    num_clients: Clients of the `mnist` and `npz` partitions.
    dirichlet_alpha: Dirichlet concentration of those partitions.
    data_npz: The `.npz` file of task `npz` (see `sources.load_npz`).
    data_dir: The LEAF directory of task `leaf` (see `tasks.leaf`).
    leaf_kind: Task `leaf`: one of `LEAF_KINDS`; 'auto' recognizes it.
    leaf_options: Task `leaf`: CelebA's images directory, Sent140's
      vocabulary (`tasks.leaf.LeafOptions`).
    data_jsonl: The `.jsonl` or `.csv` file of task `text` (`tasks.text`).
    text_level: Task `text`: one of `TEXT_LEVELS`.
    text_tokenizer: Task `text`, word level: one of `TEXT_TOKENIZERS`.
    vocab_size: Task `text`, word level: the most frequent training words.
    sequence_length: Task `text`: tokens per example.
    test_fraction: Task `text`, a file without `split`: the last fraction of
      each client's examples that go to the test set.
    model: Tasks `mnist`, `npz` and `leaf` (FEMNIST-style): one of
      `IMAGE_MODELS`, or 'auto' for the task's default (`cnn`;
      `cnn_dropout` for `leaf`).
    cache_dir: Where `emnist` and `stackoverflow` find (or download) TFF's
      files; None for TFF's default `~/.tff`.
    use_synthetic_data: Whether `emnist` and `stackoverflow` use TFF's small
      synthetic data instead (no download).
    scale_integer_features: Task `npz`: whether integer features are scaled to
      [0, 1] (see `sources.load_npz`) or cast to float32 unchanged.
    max_npz_bytes: Task `npz`: the most bytes its arrays may decompress to
      (`sources.load_npz`'s `max_bytes`); 0: from the available memory.
    eval_split: One of `EVAL_SPLITS`: what `Task.test_data` holds, the test
      set, or for `mnist` its 10,000-example validation split
      (`sources.load_mnist`).
    shuffle_buffer: The clients' shuffle buffer (`task.batching_fn`; TFF's
      `ClientSpec.shuffle_buffer_size` for `stackoverflow`); None: the
      task's default; 1: no shuffle.
    text_model: Task `text`: one of `TEXT_MODELS` (`text.TEXT_MODEL_SIZES`).
    stackoverflow_test_batches: Task `stackoverflow`: the test batches
      evaluated (the first ones of TFF's test clients' posts in id order);
      0: all of them.
    eval_per_client: Tasks `emnist`, `stackoverflow`: also count each test
      client's examples (`Task.test_clients`; one pass over the test set
      evaluated). The other tasks with test clients always have them.
    num_classes: Tasks `npz` and `leaf` (FEMNIST- and Synthetic-style
      rows): the classifier's outputs; 0: 1 + the largest label of the train
      and test splits (`task.classes_of_labels`).
  """

  batch_size: int
  epochs: int = 1
  seed: int = 0
  num_clients: int = 100
  dirichlet_alpha: float = 0.05
  data_npz: Optional[str] = None
  data_dir: Optional[str] = None
  leaf_kind: str = 'auto'
  leaf_options: leaf_lib.LeafOptions = leaf_lib.LeafOptions()
  data_jsonl: Optional[str] = None
  text_level: str = 'word'
  text_tokenizer: str = 'words'
  vocab_size: int = 10000
  sequence_length: int = 20
  test_fraction: float = 0.2
  model: str = 'auto'
  cache_dir: Optional[str] = None
  use_synthetic_data: bool = False
  scale_integer_features: bool = True
  max_npz_bytes: int = 0
  eval_split: str = 'test'
  shuffle_buffer: Optional[int] = None
  text_model: str = 'tff'
  stackoverflow_test_batches: int = choices.STACKOVERFLOW_TEST_BATCHES
  eval_per_client: bool = False
  num_classes: int = 0
