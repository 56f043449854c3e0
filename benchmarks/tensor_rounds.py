"""The bound rows: a round's arithmetic as one in-process `tf.function`.

No TFF and no `tf.data` in the timed loop: the clients' batches are
materialized once as tensors `[clients, steps, batch, ...]`
(`stack_client_data`) and a round is one call. Each algorithm gets its own
bound, the same arithmetic as its TFF process (docs/performance.md sec. 1):

* FedAvg: every client starts from x, takes one SGD step per batch on
  softmax cross-entropy; the server adds the mean client delta (equal client
  sizes: the example-weighted mean), server SGD(1.0).
* WSM clients: the same with the WSM loss, -log softmax(z + log beta)_y (the
  WSM paper's Eq. 4 up to a constant; beta = the client's class proportions,
  counted from its labels each round as the TFF client does).
* SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II): client steps
  y <- y - lr (g(y) + c - c_i); c_i+ = c_i - c + (x - y) / (K lr); server
  x <- x + lr_g mean(y - x), c <- c + sum(c_i+ - c_i) / N, the clients'
  control variates kept in variables across rounds.
"""

from collections.abc import Sequence
from typing import Optional

import numpy as np
import tensorflow as tf

from benchmarks import stepped

# log(beta_c) of a class a client does not hold (losses.wsm's value; the
# import graph keeps benchmarks from importing losses).
_MASKED_LOG_PROPORTION = -1e9


def stack_client_data(
    data: Sequence[tf.data.Dataset],
) -> tuple[tf.Tensor, tf.Tensor]:
  """Stacks equal-shaped client datasets as `[clients, steps, batch, ...]`.

  Args:
    data: Batched client datasets of `{'x', 'y'}` with the same number of
      full batches each.

  Returns:
    `(x, y)`: x of shape `[clients, steps, batch, *example]`, y of shape
    `[clients, steps, batch]`.

  Raises:
    ValueError: If the clients' batches differ in number or shape.
  """
  clients = [list(dataset.as_numpy_iterator()) for dataset in data]
  shapes = {tuple(b['x'].shape for b in batches) for batches in clients}
  if len(shapes) != 1 or len(set(next(iter(shapes)))) != 1:
    raise ValueError(
        'The bound needs clients with the same number of '
        f'equal-sized batches; got batch shapes {shapes}.'
    )
  x = np.stack([np.stack([b['x'] for b in batches]) for batches in clients])
  y = np.stack([np.stack([b['y'] for b in batches]) for batches in clients])
  return tf.constant(x), tf.constant(y)


def _log_proportions(labels: tf.Tensor, num_classes: int) -> tf.Tensor:
  """log(n_c / n) of a client's labels; masked for absent classes."""
  counts = tf.math.bincount(
      tf.cast(tf.reshape(labels, [-1]), tf.int32),
      minlength=num_classes,
      maxlength=num_classes,
      dtype=tf.float32,
  )
  beta = counts / tf.reduce_sum(counts)
  present = beta > 0
  safe = tf.where(present, beta, tf.ones_like(beta))
  return tf.where(
      present,
      tf.math.log(safe),
      tf.fill(tf.shape(beta), _MASKED_LOG_PROPORTION),
  )


def build_tensor_round(
    model: tf.keras.Model,
    client_learning_rate: float,
    *,
    client_loss: str = 'ce',
    num_classes: Optional[int] = None,
    scaffold_clients: Optional[int] = None,
    server_learning_rate: float = 1.0,
):
  """One round of FedAvg, WSM clients or SCAFFOLD as one `tf.function`.

  Args:
    model: A Keras model producing logits; its trainable weights are the
      client's working copy.
    client_learning_rate: Client SGD learning rate.
    client_loss: `'ce'` or `'wsm'`.
    num_classes: The number of classes, for `'wsm'`.
    scaffold_clients: None for FedAvg; for SCAFFOLD the population N, every
      client of a round one of N with its own control variate (clients are
      the round's rows 0..N-1).
    server_learning_rate: lr_g: the server adds lr_g x the mean client delta
      (1.0 is FedAvg's server SGD(1.0) and SCAFFOLD's default).

  Returns:
    `(round_fn, global_weights)`: `round_fn(x, y)` runs a round on tensors
    of `stack_client_data`'s shape and updates `global_weights` (a list of
    `tf.Variable`) in place.

  Raises:
    ValueError: For an unknown `client_loss` or `'wsm'` without
      `num_classes`.
  """
  if client_loss not in ('ce', 'wsm'):
    raise ValueError(f"client_loss must be 'ce' or 'wsm'; got {client_loss!r}.")
  if client_loss == 'wsm' and not num_classes:
    raise ValueError("client_loss='wsm' needs num_classes.")
  tensor_round = _TensorRound(
      model,
      client_learning_rate,
      num_classes if client_loss == 'wsm' else None,
      scaffold_clients,
      server_learning_rate,
  )
  return tensor_round.round_fn, tensor_round.global_weights


class _TensorRound:
  """The variables and traced steps of one `build_tensor_round` round."""

  def __init__(
      self, model, client_lr, wsm_classes, scaffold_clients, server_lr
  ):
    self._model = model
    self._weights = model.trainable_weights
    self._client_lr = client_lr
    self._wsm_classes = wsm_classes
    self._population = scaffold_clients
    self._server_lr = server_lr
    self.global_weights = [tf.Variable(w) for w in self._weights]
    # A tf.function of the bound method: the caller keeps only round_fn.
    self.round_fn = tf.function(self._round)
    if scaffold_clients is not None:
      self._server_c = [tf.Variable(tf.zeros_like(w)) for w in self._weights]
      self._client_c = [
          tf.Variable(tf.zeros([scaffold_clients, *w.shape], w.dtype))
          for w in self._weights
      ]

  def _train_client(self, x, y, c):
    """Client c's K SGD steps from the global model (SCAFFOLD-corrected)."""
    for var, value in zip(self._weights, self.global_weights):
      var.assign(value)
    if self._wsm_classes:
      log_beta = _log_proportions(y[c], self._wsm_classes)
    if self._population is not None:  # c - c_i, once per client
      correction = [
          sc - cc.sparse_read(c)
          for sc, cc in zip(self._server_c, self._client_c)
      ]
    for s in tf.range(tf.shape(x)[1]):
      with tf.GradientTape() as tape:
        logits = self._model(x[c, s], training=True)
        if self._wsm_classes:  # WSM: softmax(z + log beta)
          logits += log_beta
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(y[c, s], logits)
        )
      # Dense, as TFF's optimizers make an embedding's IndexedSlices.
      grads = [
          tf.convert_to_tensor(g) for g in tape.gradient(loss, self._weights)
      ]
      if self._population is not None:  # g + (c - c_i)
        grads = [g + d for g, d in zip(grads, correction)]
      for var, grad in zip(self._weights, grads):
        var.assign_sub(self._client_lr * grad)

  def _update_control_variate(self, c, steps):
    """c_i+ = c_i - c + (x - y) / (K lr); returns c_i+ - c_i."""
    scale = tf.cast(steps, tf.float32) * self._client_lr
    old = [cc.sparse_read(c) for cc in self._client_c]
    new = [
        ci - sc + (g - v) / scale
        for ci, sc, g, v in zip(
            old, self._server_c, self.global_weights, self._weights
        )
    ]
    for cc, value in zip(self._client_c, new):
      cc.scatter_nd_update([[c]], value[tf.newaxis])
    return [n - o for n, o in zip(new, old)]

  def _round(self, x, y):
    num_clients = tf.shape(x)[0]
    total = [tf.zeros_like(w) for w in self.global_weights]
    total_dc = [tf.zeros_like(w) for w in self.global_weights]
    for c in tf.range(num_clients):
      self._train_client(x, y, c)
      total = [
          t + (v - g)
          for t, g, v in zip(total, self.global_weights, self._weights)
      ]
      if self._population is not None:
        dc = self._update_control_variate(c, tf.shape(x)[1])
        total_dc = [t + d for t, d in zip(total_dc, dc)]
    size = tf.cast(num_clients, tf.float32)
    for var, t in zip(self.global_weights, total):
      var.assign_add(self._server_lr * t / size)
    if self._population is not None:  # c <- c + sum(dc_i) / N
      for var, dc in zip(self._server_c, total_dc):
        var.assign_add(dc / self._population)


def bound_row(
    keras_model_fn,
    client_learning_rate: float,
    *,
    client_loss: str = 'ce',
    num_classes: Optional[int] = None,
    scaffold: bool = False,
) -> stepped.SteppedRow:
  """A benchmark row timing `build_tensor_round` (the bound), one call/round.

  With `scaffold`, the population is the row's clients (as `scaffold_row`).
  Returns a `rounds.RowFn` whose `rounds` steps it (`stepped.SteppedRow`).
  """

  def rounds(data):
    x, y = stack_client_data(data)
    round_fn, global_weights = build_tensor_round(
        keras_model_fn(),
        client_learning_rate,
        client_loss=client_loss,
        num_classes=num_classes,
        scaffold_clients=len(data) if scaffold else None,
    )
    round_fn(x, y)  # Warm-up (tracing).
    return stepped.Rounds(
        lambda: round_fn(x, y),
        lambda: sum(w.numpy().nbytes for w in global_weights) / 2**20,
    )

  return stepped.SteppedRow(rounds)
