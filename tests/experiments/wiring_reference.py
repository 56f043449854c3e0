"""Independent numpy arithmetic for wiring_test.py (no tff_fedwin imports).

Written from the papers' equations and TFF's documented optimizer updates, not
from the code under test, in float64, for the one-hidden-layer ReLU network the
`npz` task builds for 1-D features: z = relu(x W1 + b1) W2 + b2 (logits). The
weights are one flat vector `w` (`unflatten` splits it into W1, b1, W2, b2).

* Client losses: the softmax cross-entropy (mean over the batch) and the WSM
  re-weighted softmax (Legate et al., Eq. 4): with the client's class
  proportions beta_c = n_c / n, dl/dz = beta e^z / sum_c beta_c e^{z_c} -
  onehot(y).
* Client SGD, one step per batch, optionally with the FedProx term
  mu (w - w_global) (Li et al. 2020, Eq. 2) or the SCAFFOLD correction c - c_i.
* Server optimizers on the averaged update u = w_global - mean(w_client), as
  TFF 0.87's `tff.learning.optimizers` document them: SGD w -= lr u; SGD with
  momentum a = m a + u, w -= lr a; Adam and Yogi with
  lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), w -= lr_t a / (sqrt(v) + eps).
* SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II).
"""

import numpy as np


def unflatten(w, input_dim, hidden, num_classes):
  """Splits the flat weights into (W1, b1, W2, b2)."""
  sizes = [input_dim * hidden, hidden, hidden * num_classes, num_classes]
  w1, b1, w2, b2 = np.split(w, np.cumsum(sizes)[:-1])
  return (
      w1.reshape(input_dim, hidden),
      b1,
      w2.reshape(hidden, num_classes),
      b2,
  )


class Mlp:
  """z = relu(x W1 + b1) W2 + b2 on flat float64 weights."""

  def __init__(self, input_dim, hidden, num_classes):
    self.shape = (input_dim, hidden, num_classes)

  def logits(self, w, x):
    w1, b1, w2, b2 = unflatten(w, *self.shape)
    return np.maximum(x @ w1 + b1, 0.0) @ w2 + b2

  def gradient(self, w, x, dlogits):
    """d/dw of sum(z * dlogits): backpropagation through the two layers."""
    w1, b1, w2, _ = unflatten(w, *self.shape)
    pre = x @ w1 + b1
    hidden = np.maximum(pre, 0.0)
    dpre = (dlogits @ w2.T) * (pre > 0)
    return np.concatenate(
        [
            (x.T @ dpre).ravel(),
            dpre.sum(0),
            (hidden.T @ dlogits).ravel(),
            dlogits.sum(0),
        ]
    )

  def cross_entropy(self, w, x, y):
    """Mean softmax cross-entropy of the labels `y` (the evaluation loss)."""
    z = self.logits(w, x)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -np.mean(log_p[np.arange(len(y)), y])


def _softmax(z):
  z = z - z.max(axis=1, keepdims=True)
  p = np.exp(z)
  return p / p.sum(axis=1, keepdims=True)


def batch_gradient(model, w, x, y, class_proportions=None):
  """Gradient of the batch mean of CE, or of WSM given `class_proportions`.

  CE: dl/dz = softmax(z) - onehot(y). WSM: dl/dz = beta e^z / sum beta e^z -
  onehot(y), i.e. the softmax of z + log(beta).
  """
  z = model.logits(w, x)
  if class_proportions is not None:
    z = z + np.log(class_proportions)  # All classes present in these tests.
  dlogits = _softmax(z) - np.eye(z.shape[1])[y]
  return model.gradient(w, x, dlogits / len(x))


def sam_step(model, w, g, kind, rho, eta):
  """e of SAM (Foret et al. 2021) or ASAM (Kwon et al. 2021) on flat w.

  SAM: e = rho g / ||g||. ASAM: e = rho T^2 g / ||T g|| with T = |w| + eta on
  the kernels W1, W2 and T = 1 on the biases b1, b2 (the FedSAM authors'
  minimizers.py scales the parameters named 'weight' only).
  """
  if kind == 'sam':
    t = np.ones_like(w)
  else:
    w1, b1, w2, b2 = unflatten(w, *model.shape)
    t = np.concatenate(
        [
            np.abs(w1).ravel() + eta,
            np.ones_like(b1),
            np.abs(w2).ravel() + eta,
            np.ones_like(b2),
        ]
    )
  return rho * t * t * g / (np.linalg.norm(t * g) + 1e-16)


def client_sgd(
    model,
    w_global,
    batches,
    *,
    learning_rate,
    client_loss='ce',
    proximal_strength=0.0,
    correction=None,
    momentum=0.0,
    weight_decay=0.0,
    sharpness=None,
):
  """One SGD step per batch from w_global; returns (trained w, K batches).

  The step direction is g(w) + wd w + mu (w - w_global) + correction (wd
  the weight decay, added to the gradient as PyTorch's SGD does), with g the
  batch gradient of the client loss (WSM with the client's class proportions
  over all its batches). FedProx's Eq. 2 has mu >= 0; a negative mu gives the
  term with the opposite sign, mu' (w_global - w) with mu' = -mu. With
  `momentum` m (TFF's SGDM, a fresh accumulator per client and round):
  a = m a + step, w -= lr a.

  With `sharpness` = (kind, rho, eta), g is the batch gradient at w + e
  instead (`sam_step`): FedSAM / FedASAM clients.
  """
  beta = None
  if client_loss == 'wsm':
    labels = np.concatenate([y for _, y in batches])
    num_classes = model.shape[2]
    beta = np.bincount(labels, minlength=num_classes) / len(labels)
  w = w_global.copy()
  accumulator = 0.0
  for x, y in batches:
    if sharpness is None:
      gradient = batch_gradient(model, w, x, y, beta)
    else:
      e = sam_step(model, w, batch_gradient(model, w, x, y, beta), *sharpness)
      gradient = batch_gradient(model, w + e, x, y, beta)
    step = gradient + weight_decay * w
    step = step + proximal_strength * (w - w_global)
    if correction is not None:
      step = step + correction
    accumulator = momentum * accumulator + step
    w = w - learning_rate * accumulator
  return w, len(batches)


class Sgd:
  """w -= lr u; with momentum m: a = m a + u, w -= lr a (TFF's SGDM)."""

  def __init__(self, learning_rate, momentum=0.0):
    self.lr, self.momentum, self.accumulator = learning_rate, momentum, 0.0

  def step(self, w, update):
    self.accumulator = self.momentum * self.accumulator + update
    return w - self.lr * self.accumulator


class Adam:
  """TFF's Adam: epsilon outside the square root, bias correction in lr_t."""

  def __init__(self, learning_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    self.lr, self.b1, self.b2, self.eps = (
        learning_rate,
        beta_1,
        beta_2,
        epsilon,
    )
    self.t, self.m, self.v = 0, 0.0, 0.0

  def _second_moment(self, update):
    return self.b2 * self.v + (1 - self.b2) * update**2

  def step(self, w, update):
    self.t += 1
    self.m = self.b1 * self.m + (1 - self.b1) * update
    self.v = self._second_moment(update)
    lr_t = self.lr * np.sqrt(1 - self.b2**self.t) / (1 - self.b1**self.t)
    return w - lr_t * self.m / (np.sqrt(self.v) + self.eps)


class Yogi(Adam):
  """Yogi (Zaheer et al. 2018): v += (1 - b2) sign(u^2 - v) u^2, v0 = 1e-6."""

  def __init__(
      self,
      learning_rate,
      beta_1=0.9,
      beta_2=0.999,
      epsilon=1e-3,
      initial_preconditioner=1e-6,
  ):
    super().__init__(learning_rate, beta_1, beta_2, epsilon)
    self.v = initial_preconditioner

  def _second_moment(self, update):
    return self.v + (1 - self.b2) * np.sign(update**2 - self.v) * update**2


def fedavg_family(
    model,
    w0,
    client_batches,
    *,
    rounds,
    server_optimizer,
    client_learning_rates,
    client_loss='ce',
    proximal_strength=0.0,
    client_momentum=0.0,
    weight_decay=0.0,
    sharpness=None,
    ima_window=None,
    aggregates=None,
    fednova=False,
    round_batches=None,
):
  """FedAvg with a server optimizer: [w^0, w^1, ..., w^rounds].

  Round t: every client i trains from w^{t-1} to w_i with the rate
  client_learning_rates[t-1]; u = sum_i n_i (w^{t-1} - w_i) / sum_i n_i;
  w^t = server_optimizer.step(w^{t-1}, u).

  With `ima_window` (W, t_s), IMA (Algorithm 1): the server keeps the
  aggregates a^t = server_optimizer.step(w^{t-1}, u), and from round
  t >= max(W, t_s) on sends w^t = (1/W) sum_{k<W} a^{t-k} (IMA Eq. 5);
  before it w^t = a^t. The list `aggregates` (if given) receives a^1..a^T.

  With `fednova` (Wang et al. 2020), u = tau_eff sum_i p_i (w^{t-1} - w_i)
  / a_i with p_i = n_i / sum n, a_i = (K_i - m (1 - m^K_i) / (1 - m)) /
  (1 - m) for K_i steps with client momentum m (K_i for m = 0) and tau_eff
  = sum_i p_i a_i.

  With `round_batches`, client i trains on its first round_batches[t-1]
  batches in round t (IMA's epoch decay where a batch is an epoch).
  """
  models = [w0]
  kept = [] if aggregates is None else aggregates
  for t in range(rounds):
    w = models[-1]
    updates, weights, step_counts = [], [], []
    for batches in client_batches:
      if round_batches is not None:
        batches = batches[: round_batches[t]]
      trained, steps = client_sgd(
          model,
          w,
          batches,
          learning_rate=client_learning_rates[t],
          client_loss=client_loss,
          proximal_strength=proximal_strength,
          momentum=client_momentum,
          weight_decay=weight_decay,
          sharpness=sharpness,
      )
      a = steps
      if client_momentum:
        m = client_momentum
        a = (steps - m * (1 - m**steps) / (1 - m)) / (1 - m)
      updates.append((w - trained) / a if fednova else w - trained)
      step_counts.append(a)
      weights.append(sum(len(y) for _, y in batches))
    update = np.average(updates, axis=0, weights=weights)
    if fednova:
      update = np.average(step_counts, weights=weights) * update
    kept.append(server_optimizer.step(w, update))
    models.append(kept[-1])
    if ima_window is not None and t + 1 >= max(ima_window):
      models[-1] = np.mean(kept[-ima_window[0] :], axis=0)
  return models


def scaffold(
    model,
    w0,
    client_batches,
    *,
    rounds,
    client_learning_rate,
    server_learning_rate,
    client_loss='ce',
    weight_decay=0.0,
    sharpness=None,
):
  """SCAFFOLD, all N clients every round: [x^0, ..., x^rounds].

  Client i: y_i from x with steps lr_l (g(y) + wd y + c - c_i); c_i+ = c_i - c +
  (x - y_i) / (K lr_l). Server: x += lr_g mean_i(y_i - x); c += |S|/N
  mean_i(c_i+ - c_i) with |S| = N.
  """
  c = np.zeros_like(w0)
  c_clients = [np.zeros_like(w0) for _ in client_batches]
  models = [w0]
  for _ in range(rounds):
    x = models[-1]
    deltas, control_deltas = [], []
    for i, batches in enumerate(client_batches):
      y, k = client_sgd(
          model,
          x,
          batches,
          learning_rate=client_learning_rate,
          client_loss=client_loss,
          correction=c - c_clients[i],
          weight_decay=weight_decay,
          sharpness=sharpness,
      )
      new_c_i = c_clients[i] - c + (x - y) / (k * client_learning_rate)
      deltas.append(y - x)
      control_deltas.append(new_c_i - c_clients[i])
      c_clients[i] = new_c_i
    models.append(x + server_learning_rate * np.mean(deltas, axis=0))
    c = c + np.mean(control_deltas, axis=0)
  return models
