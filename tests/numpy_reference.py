"""Independent numpy arithmetic for the window tests (no tff_fedwin imports).

Written from the papers' equations, not from the code under test:
* FedAvg (McMahan et al. 2017) on a linear model y = x @ w with the mean
  squared error loss, client SGD over fixed batches;
* the window model as the mean of the last W models (WiMA Eq. 4) and as the
  decayed sum of updates (WiMA Eq. 6/7, appendix Eq. 18);
* IMA (Algorithm 1): from the start round the clients receive the window mean.
"""

import numpy as np


def linear_mse_client_update(w, batches, learning_rate):
  """Client SGD on 1/b * sum (x @ w - y)^2 per batch; returns (delta, n).

  d/dw of mean_b (x_b w - y_b)^2 = 2/b * x^T (x w - y). The delta follows
  TFF's convention: initial - trained.
  """
  trained = w.astype(np.float64).copy()
  n = 0
  for x, y in batches:
    grad = 2.0 / len(x) * x.T @ (x @ trained - y)
    trained -= learning_rate * grad
    n += len(x)
  return w - trained, n


def linear_wsm_client_update(w, batches, learning_rate):
  """Client SGD on the WSM loss of a linear softmax model z = x @ w.

  beta_c = n_c / n over all the client's batches (one pass first). With
  p_beta_j = beta_j e^{z_j} / sum_k beta_k e^{z_k}, the loss
  -log p_beta_y has gradient d/dz = p_beta - onehot(y) (WSM Eq. 4), so
  d/dw of the batch mean is x^T (p_beta - onehot(y)) / b. Labels are ints.
  """
  num_classes = w.shape[1]
  labels = np.concatenate([y for _, y in batches]).astype(int)
  beta = np.bincount(labels, minlength=num_classes) / len(labels)
  trained = w.astype(np.float64).copy()
  n = 0
  for x, y in batches:
    z = x @ trained
    with np.errstate(divide='ignore'):
      shifted = z + np.log(beta)
    shifted -= shifted.max(axis=1, keepdims=True)
    p = np.exp(shifted)
    p /= p.sum(axis=1, keepdims=True)
    onehot = np.eye(num_classes)[y.astype(int)]
    trained -= learning_rate * x.T @ (p - onehot) / len(x)
    n += len(x)
  return w - trained, n


def fedavg_aggregate(
    w, client_batches, learning_rate, client_update=linear_mse_client_update
):
  """Example-weighted mean of the client deltas (FedAvg, Eq. 3 of WiMA)."""
  deltas, weights = zip(
      *[client_update(w, batches, learning_rate) for batches in client_batches]
  )
  return sum(n * d for d, n in zip(deltas, weights)) / sum(weights)


def window_mean_eq4(models, t, window_size):
  """m^t = 1/W * sum_{k=0}^{W-1} w^{t-k}; `models[k]` is w^k."""
  return np.mean(models[t - window_size + 1 : t + 1], axis=0)


def window_mean_eq6(models, t, window_size):
  """WiMA Eq. 6/7 with t' = t - W: the window mean as decayed updates.

  m^t = w^{t'} - sum_{tau=t'}^{t'+W-1} (t' + W - tau) / W * (w^tau - w^{tau+1}),
  where w^tau - w^{tau+1} is the update the server applied in round tau+1.
  """
  t_prime = t - window_size
  total = models[t_prime].copy()
  for tau in range(t_prime, t):
    total -= (
        (t_prime + window_size - tau)
        / window_size
        * (models[tau] - models[tau + 1])
    )
  return total


def simulate(
    w0,
    client_batches,
    *,
    rounds,
    client_learning_rate,
    window_size,
    mode,
    start_round,
    server_learning_rate=1.0,
    server_momentum=0.0,
    client_update=linear_mse_client_update,
):
  """FedAvg(M) with a window, in float64.

  Returns dict with lists indexed by round t = 0..rounds:
    'aggregated': w^t, the post-optimizer model of round t (w^0 initial);
    'sent': x^t, the model clients start round t+1 from;
    'window': the window model of round t (w^t while inactive);
    'active': whether t >= max(W, start_round).
  Server SGD with momentum as in TFF's SGDM: a = mu * a + g; w -= lr * a.
  """
  aggregated = [np.asarray(w0, np.float64)]
  sent = [aggregated[0]]
  window = [aggregated[0]]
  active = [False]
  accumulator = np.zeros_like(aggregated[0])
  for t in range(1, rounds + 1):
    update = fedavg_aggregate(
        sent[-1], client_batches, client_learning_rate, client_update
    )
    accumulator = server_momentum * accumulator + update
    w_t = sent[-1] - server_learning_rate * accumulator
    aggregated.append(w_t)
    is_active = t >= max(window_size, start_round)
    m_t = window_mean_eq4(aggregated, t, window_size) if is_active else w_t
    active.append(is_active)
    window.append(m_t)
    sent.append(m_t if (mode == 'broadcast' and is_active) else w_t)
  return dict(aggregated=aggregated, sent=sent, window=window, active=active)
