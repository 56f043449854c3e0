"""Independent numpy arithmetic of the client-state family for wiring_test.py.

FedDyn, FedCM, FedACG, AdaBest, MIME, FedGMA and FedFA, each from its paper's algorithm
(the references in each docstring), in float64 on `wiring_reference`'s
network, client SGD and batch gradients (no tff_fedwin imports). Every
client takes part in every round. `client_learning_rate` is lr_l, or (FedDyn,
FedCM, FedGMA) the list of round t's lr_l, t = 1, 2, ... (a client schedule).
"""

import numpy as np

from tests import fedfa_reference as fedfa_ref
from tests.experiments.wiring_reference import batch_gradient
from tests.experiments.wiring_reference import client_sgd
from tests.experiments.wiring_reference import unflatten


def _rate(client_learning_rate, t):
  """lr_l of round t + 1 (t = 0, 1, ...): the list's entry, or the float."""
  if isinstance(client_learning_rate, (list, tuple)):
    return client_learning_rate[t]
  return client_learning_rate


def feddyn(
    model,
    w0,
    client_batches,
    *,
    rounds,
    alpha,
    client_learning_rate,
    server_learning_rate,
    client_loss='ce',
    ima_window=None,
    aggregates=None,
):
  """FedDyn (Acar et al. 2021, Alg. 1), all N clients every round.

  Client i: y_i from x with steps lr_l (g(y) - s_i + alpha (y - x)); s_i -=
  alpha (y_i - x). Server: h -= alpha / N sum_i (y_i - x); a = x + lr_g
  (mean_i(y_i - x) - h / alpha) (the paper's mean(y_i) - h / alpha for
  lr_g = 1). With `ima_window` (W, t_s) the next round's x is the mean of
  the last W a's from round max(W, t_s) on (as `fedavg_family`); the list
  `aggregates` (if given) receives a^1..a^T. Returns [x^0, ..., x^rounds].
  """
  h = np.zeros_like(w0)
  s = [np.zeros_like(w0) for _ in client_batches]
  models = [w0]
  kept = [] if aggregates is None else aggregates
  for t in range(rounds):
    x = models[-1]
    deltas = []
    for i, batches in enumerate(client_batches):
      y, _ = client_sgd(
          model,
          x,
          batches,
          learning_rate=_rate(client_learning_rate, t),
          client_loss=client_loss,
          proximal_strength=alpha,
          correction=-s[i],
      )
      s[i] = s[i] - alpha * (y - x)
      deltas.append(y - x)
    h = h - alpha / len(client_batches) * np.sum(deltas, axis=0)
    kept.append(
        x + server_learning_rate * (np.mean(deltas, axis=0) - h / alpha)
    )
    models.append(kept[-1])
    if ima_window is not None and t + 1 >= max(ima_window):
      models[-1] = np.mean(kept[-ima_window[0] :], axis=0)
  return models


def _windowed(models, kept, t, ima_window):
  """IMA: from round max(W, t_s) on the next x is the mean of the last W
  aggregates (as `fedavg_family`)."""
  if ima_window is not None and t + 1 >= max(ima_window):
    models[-1] = np.mean(kept[-ima_window[0] :], axis=0)


def fedcm(
    model,
    w0,
    client_batches,
    *,
    rounds,
    alpha,
    client_learning_rate,
    server_learning_rate,
    client_loss='ce',
):
  """FedCM (Xu et al. 2021, Alg. 1), all N clients every round.

  Client i: y_i from x with steps lr_l (alpha g(y) + (1 - alpha) Delta),
  K_i steps; Delta+ = mean_i (x - y_i) / (lr_l K_i); x += lr_g mean_i(y_i -
  x). Returns [x^0, ..., x^rounds].
  """
  delta = np.zeros_like(w0)
  models = [w0]
  for t in range(rounds):
    x = models[-1]
    lr = _rate(client_learning_rate, t)
    deltas, sent = [], []
    for batches in client_batches:
      beta = None
      if client_loss == 'wsm':
        labels = np.concatenate([y for _, y in batches])
        beta = np.bincount(labels, minlength=model.shape[2]) / len(labels)
      w = x.copy()
      for xb, yb in batches:
        g = batch_gradient(model, w, xb, yb, beta)
        w = w - lr * (alpha * g + (1 - alpha) * delta)
      deltas.append(w - x)
      sent.append((x - w) / (lr * len(batches)))
    delta = np.mean(sent, axis=0)
    models.append(x + server_learning_rate * np.mean(deltas, axis=0))
  return models


def fedacg(
    model,
    w0,
    client_batches,
    *,
    rounds,
    lookahead,
    proximal_strength,
    client_learning_rate,
    server_learning_rate,
    ima_window=None,
    aggregates=None,
):
  """FedACG (Kim et al. 2024, Alg. 1), all N clients every round.

  s = x + lambda m; client i: y_i from s with steps lr_l (g(y) + beta (y -
  s)); m = lambda m + mean_i(y_i - s); a = x + lr_g m. IMA and `aggregates`
  as in `feddyn`. Returns [x^0, ..., x^rounds].
  """
  m = np.zeros_like(w0)
  models = [w0]
  kept = [] if aggregates is None else aggregates
  for t in range(rounds):
    x = models[-1]
    s = x + lookahead * m
    deltas = []
    for batches in client_batches:
      w = s.copy()
      for xb, yb in batches:
        g = batch_gradient(model, w, xb, yb)
        w = w - client_learning_rate * (g + proximal_strength * (w - s))
      deltas.append(w - s)
    m = lookahead * m + np.mean(deltas, axis=0)
    kept.append(x + server_learning_rate * m)
    models.append(kept[-1])
    _windowed(models, kept, t, ima_window)
  return models


def adabest(
    model,
    w0,
    client_batches,
    *,
    rounds,
    mu,
    beta,
    client_learning_rate,
    server_learning_rate,
    client_loss='ce',
):
  """AdaBest (Varno et al. 2022, Alg. 1), all N clients every round (so
  t - t_i' = 1 after round 1, and t at a client's first round, where h_i = 0).

  Client i: y_i from x with steps lr_l (g(y) - h_i); h_i = h_i / (t - t_i') +
  mu (x - y_i). Server: m = mean_i y_i, h = beta (m_prev - m) (m_prev = w^0
  at first), x += lr_g (m - h - x). Returns [x^0, ..., x^rounds].
  """
  h = [np.zeros_like(w0) for _ in client_batches]
  last = [0] * len(client_batches)
  mean_prev = w0
  models = [w0]
  for t in range(1, rounds + 1):
    x = models[-1]
    local = []
    for i, batches in enumerate(client_batches):
      y, _ = client_sgd(
          model,
          x,
          batches,
          learning_rate=client_learning_rate,
          client_loss=client_loss,
          correction=-h[i],
      )
      h[i] = h[i] / (t - last[i]) + mu * (x - y)
      last[i] = t
      local.append(y)
    mean = np.mean(local, axis=0)
    correction = beta * (mean_prev - mean)
    models.append(x + server_learning_rate * (mean - correction - x))
    mean_prev = mean
  return models


def _class_proportions(model, batches, client_loss):
  """WSM's beta over the client's batches, or None for CE."""
  if client_loss != 'wsm':
    return None
  labels = np.concatenate([y for _, y in batches])
  return np.bincount(labels, minlength=model.shape[2]) / len(labels)


def mime(
    model,
    w0,
    client_batches,
    *,
    rounds,
    beta,
    client_learning_rate,
    server_learning_rate,
    client_loss='ce',
    ima_window=None,
    aggregates=None,
):
  """MIME with SGDm (Karimireddy et al. 2021, Alg. 1), all N clients.

  c = mean_i grad f_i(x), grad f_i(x) = sum_b n_b g_b(x) / sum_b n_b; client
  i: y_i from x with steps lr_l ((1 - beta) (g(y; b) - g(x; b) + c) + beta
  m), the old m; then m = (1 - beta) c + beta m, a = x + lr_g mean_i(y_i -
  x). IMA and `aggregates` as in `feddyn`. Returns [x^0, ..., x^rounds].
  """
  m = np.zeros_like(w0)
  models = [w0]
  kept = [] if aggregates is None else aggregates
  for t in range(rounds):
    x = models[-1]
    betas = [_class_proportions(model, b, client_loss) for b in client_batches]
    full = [
        sum(len(yb) * batch_gradient(model, x, xb, yb, p) for xb, yb in b)
        / sum(len(yb) for _, yb in b)
        for b, p in zip(client_batches, betas)
    ]
    c = np.mean(full, axis=0)
    deltas = []
    for batches, p in zip(client_batches, betas):
      w = x.copy()
      for xb, yb in batches:
        corrected = (
            batch_gradient(model, w, xb, yb, p)
            - batch_gradient(model, x, xb, yb, p)
            + c
        )
        w = w - client_learning_rate * ((1 - beta) * corrected + beta * m)
      deltas.append(w - x)
    m = (1 - beta) * c + beta * m
    kept.append(x + server_learning_rate * np.mean(deltas, axis=0))
    models.append(kept[-1])
    _windowed(models, kept, t, ima_window)
  return models


def fedgma(
    model,
    w0,
    client_batches,
    *,
    rounds,
    threshold,
    client_learning_rate,
    server_learning_rate,
    client_loss='ce',
    ima_window=None,
    aggregates=None,
):
  """FedGMA (Tenison et al. 2023; soft AND-mask), all N clients every round.

  Client i: y_i from x by plain SGD; A = |mean_i sign(y_i - x)|, m = 1 where
  A > tau else A; a = x + lr_g m * mean_i(y_i - x). IMA and `aggregates` as
  in `feddyn`. Returns [x^0, ..., x^rounds].
  """
  models = [w0]
  kept = [] if aggregates is None else aggregates
  for t in range(rounds):
    x = models[-1]
    deltas = [
        client_sgd(
            model,
            x,
            batches,
            learning_rate=_rate(client_learning_rate, t),
            client_loss=client_loss,
        )[0]
        - x
        for batches in client_batches
    ]
    agreement = np.abs(np.mean(np.sign(deltas), axis=0))
    mask = np.where(agreement > threshold, 1.0, agreement)
    kept.append(x + server_learning_rate * mask * np.mean(deltas, axis=0))
    models.append(kept[-1])
    _windowed(models, kept, t, ima_window)
  return models


def fedfa(
    model,
    w0,
    client_batches,
    *,
    rounds,
    anchor_lambda,
    momentum,
    calibration_start_round,
    client_learning_rate,
    server_learning_rate,
    ima_window=None,
    aggregates=None,
):
  """FedFA (Zhou et al. 2023, as the IMA authors run it), all N clients.

  Round t + 1 (t = 0, 1, ...) is `tests.fedfa_reference.np_fedfa_round` on
  the network's (W1, b1, W2, b2), from anchors the first C rows of the
  d x d identity: the anchor loss from t >= 1, the calibration for
  t + 1 >= `calibration_start_round`. IMA and `aggregates` as in `feddyn`. Returns
  [x^0, ..., x^rounds].
  """
  _, hidden, num_classes = model.shape
  anchors = np.eye(hidden)[:num_classes]
  models = [w0]
  kept = [] if aggregates is None else aggregates
  for t in range(rounds):
    new, anchors, _ = fedfa_ref.np_fedfa_round(
        list(unflatten(models[-1], *model.shape)),
        anchors,
        client_batches,
        lr=_rate(client_learning_rate, t),
        server_lr=server_learning_rate,
        lam=anchor_lambda,
        momentum=momentum,
        anchor_loss=t >= 1,
        calibrate=t + 1 >= calibration_start_round,
    )
    kept.append(np.concatenate([p.ravel() for p in new]))
    models.append(kept[-1])
    _windowed(models, kept, t, ima_window)
  return models
