"""What a text run's last global model predicts at the targets its accuracy counts.

Reads the two server-state files a run directory keeps (`server_state_files/
server_state.{a,b}`, the last two rounds' states, written alternately): their
first tensors (`0`, `1`, ...) are the global model's weights in the order of
`tff_fedwin.tasks.text.create_recurrent_model`'s `get_weights()`.
For each file prints the accuracy the run's metric computes (arg-max over all
ids, targets other than padding, OOV and EOS), which identifies the file
(it equals a row of `metrics.csv`); the arg-max's most frequent ids at those
targets; and the accuracy of the arg-max over the ids that can count (padding,
OOV, EOS and BOS never predicted), a diagnostic, not a metric of this package.

Usage: python argmax_share.py RUN_DIR FILE.jsonl VOCAB_SIZE
"""

import sys

import numpy as np
import tensorflow as tf

from tff_fedwin.data import text_vocab
from tff_fedwin.tasks import text


def main(run_dir, path, vocab_size):
  data = text.load_text_data(path, vocab_size=int(vocab_size))
  vocab = data.vocab
  x, y = data.test
  uncounted = [text_vocab.PAD_ID, vocab.oov_id, vocab.eos_id]
  counted = ~np.isin(y, uncounted)
  names = {vocab.oov_id: '<OOV>', vocab.eos_id: '<EOS>'}
  model = text.create_recurrent_model(vocab.num_ids, sequence_length=x.shape[1])
  for part in 'ab':
    reader = tf.train.load_checkpoint(
        f'{run_dir}/server_state_files/server_state.{part}'
    )
    model.set_weights(
        [reader.get_tensor(str(i)) for i in range(len(model.weights))]
    )
    logits = model.predict(x, batch_size=500, verbose=0)
    predicted = np.argmax(logits, -1)[counted]
    logits[..., uncounted + [vocab.bos_id]] = -np.inf  # BOS: never a target
    restricted = np.argmax(logits, -1)[counted]
    ids, counts = np.unique(predicted, return_counts=True)
    top = np.argsort(-counts)[:6]
    shares = ', '.join(
        f'{names.get(ids[i]) or vocab.tokens[ids[i] - 1]!r} '
        f'{counts[i] / predicted.size:.3f}'
        for i in top
    )
    print(
        f'server_state.{part}: accuracy {np.mean(predicted == y[counted]):.4f} '
        f'over {predicted.size} counted targets; arg-max there: {shares}; '
        f'arg-max over counted ids only: accuracy '
        f'{np.mean(restricted == y[counted]):.4f}'
    )


if __name__ == '__main__':
  main(*sys.argv[1:])
