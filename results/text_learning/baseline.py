"""The text task's frequency baselines on a file, as the run's metrics count.

Loss: the cross-entropy of the test targets (every target but padding, as
the task's masked loss) under the training targets' unigram frequencies
(add-one smoothed over the id space). Accuracy: always predicting the most
frequent training target that the task's accuracy counts (not padding, OOV
or EOS), over the test targets it counts.

Usage: python baseline.py FILE.jsonl VOCAB_SIZE TOKENIZER
"""

import sys

import numpy as np

from tff_fedwin.data import text_vocab
from tff_fedwin.tasks import text


def main(path, vocab_size, tokenizer):
  data = text.load_text_data(
      path, vocab_size=int(vocab_size), tokenizer=tokenizer
  )
  vocab = data.vocab
  train_y = np.concatenate([data.train[c][1] for c in data.client_ids])
  counts = np.bincount(train_y.ravel(), minlength=vocab.num_ids)
  counts[text_vocab.PAD_ID] = 0
  p = (counts + 1) / (counts.sum() + vocab.num_ids)
  test_y = data.test[1].ravel()
  test_y = test_y[test_y != text_vocab.PAD_ID]
  loss = -np.mean(np.log(p[test_y]))
  counted = ~np.isin(test_y, [vocab.oov_id, vocab.eos_id])
  ranked = counts.copy()
  ranked[[vocab.oov_id, vocab.eos_id]] = 0
  top = int(np.argmax(ranked))
  accuracy = np.mean(test_y[counted] == top)
  oov = np.mean(test_y == vocab.oov_id)
  print(
      f'{path} tokenizer={tokenizer} vocab_size={vocab_size}: '
      f'{len(data.client_ids)} clients, {train_y.shape[0]} train / '
      f'{data.test[1].shape[0]} test examples, {test_y.size} test targets, '
      f'OOV {oov:.3f} of them; unigram loss {loss:.4f}; always '
      f'{vocab.tokens[top - 1]!r}: accuracy {accuracy:.4f}'
  )


if __name__ == '__main__':
  main(*sys.argv[1:])
