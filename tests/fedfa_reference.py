"""An independent float64 numpy FedFA (Zhou et al. 2023) for a 2-layer model.

FedFA as the IMA authors' code runs it (`fedfa_cl_optimizer` and `AnchorLoss`
in TailinZhou/FedIMA): clients take plain SGD steps on cross-entropy plus the
feature-anchor loss, optionally followed per batch by one Adam step that
calibrates the classifier on the (fixed) server anchors; they return their
model and momentum-updated class anchors, and the server averages the models
(unweighted, with a server rate) and the anchors (weighted by examples).

The model: features f = relu(x W1 + b1) (d = 4), logits z = f W2 + b2
(C = 3); parameters are lists [W1, b1, W2, b2] of float64 arrays.
"""

import numpy as np

from tests import scaffold_reference as sref

NUM_HIDDEN = 4
ADAM_LR, ADAM_BETA1, ADAM_BETA2, ADAM_EPS = 1e-3, 0.9, 0.999, 1e-8


def np_initial_params():
  """[W1, b1, W2, b2], float32-representable float64 arrays (seed 7)."""
  rng = np.random.default_rng(7)
  c, d, k = sref.NUM_FEATURES, NUM_HIDDEN, sref.NUM_CLASSES
  params = [
      0.5 * rng.normal(size=(c, d)),
      0.1 * rng.normal(size=(d,)),
      0.5 * rng.normal(size=(d, k)),
      0.1 * rng.normal(size=(k,)),
  ]
  return [p.astype(np.float32).astype(np.float64) for p in params]


def np_initial_anchors():
  """The first C rows of the d x d identity, shape [C, d]."""
  return np.eye(NUM_HIDDEN)[: sref.NUM_CLASSES]


def _softmax_ce(logits, labels):
  """Mean cross-entropy and its gradient (p - onehot) / n w.r.t. the logits."""
  shifted = logits - logits.max(axis=1, keepdims=True)
  probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
  n = len(labels)
  loss = -np.mean(np.log(probs[np.arange(n), labels]))
  dlogits = probs.copy()
  dlogits[np.arange(n), labels] -= 1.0
  return loss, dlogits / n


def np_features(params, x):
  """f = relu(x W1 + b1)."""
  w1, b1, _, _ = params
  return np.maximum(np.asarray(x, np.float64) @ w1 + b1, 0.0)


def np_fedfa_loss_and_gradients(params, anchors, x, y, *, lam, anchor_loss):
  """Batch loss mean_i CE(z_i, y_i) (+ the anchor loss) and its gradients.

  Anchor loss (`AnchorLoss.forward`): R = lam / C * sum_i ||f_i - A_{y_i}||^2
  / n_{y_i}, n_c the count of class c in the batch, i.e. lam / C times the sum
  over present classes of the class-mean squared distance to its anchor.
  Backprop with h = x W1 + b1, f = relu(h), z = f W2 + b2:
    dL/dz = (softmax(z) - onehot) / n                      (mean CE),
    dL/dW2 = f^T dL/dz, dL/db2 = sum_rows dL/dz,
    dL/df_i = (dL/dz W2^T)_i + 2 lam / (C n_{y_i}) (f_i - A_{y_i}),
    dL/dh = dL/df * [h > 0]                                (relu'(0) = 0),
    dL/dW1 = x^T dL/dh, dL/db1 = sum_rows dL/dh.
  """
  w1, b1, w2, b2 = params
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.int64)
  h = x @ w1 + b1
  f = np.maximum(h, 0.0)
  loss, dz = _softmax_ce(f @ w2 + b2, y)
  df = dz @ w2.T
  if anchor_loss:
    num_classes = len(anchors)
    counts = np.bincount(y, minlength=num_classes)[y].astype(np.float64)
    diff = f - anchors[y]
    loss += lam / num_classes * np.sum(np.sum(diff**2, axis=1) / counts)
    df += 2.0 * lam / num_classes * diff / counts[:, None]
  dh = df * (h > 0)
  return loss, [x.T @ dh, dh.sum(axis=0), f.T @ dz, dz.sum(axis=0)]


def np_calibration_loss_and_gradients(params, anchors):
  """mean_c CE(A_c W2 + b2, c) and its gradients [dW2, db2].

  The anchors are the inputs, labels 0..C-1: dL/dz = (softmax(z) - I) / C,
  dL/dW2 = A^T dL/dz, dL/db2 = sum_rows dL/dz.
  """
  _, _, w2, b2 = params
  loss, dz = _softmax_ce(anchors @ w2 + b2, np.arange(len(anchors)))
  return loss, [anchors.T @ dz, dz.sum(axis=0)]


def np_fedfa_client(
    params, anchors, batches, *, lr, lam, momentum, anchor_loss, calibrate
):
  """One client's round; returns (y, client anchors A_i, number of examples).

  Per batch: accumulate the class-mean features at the pre-step model, one SGD
  step on CE (+ anchor loss), then (if `calibrate`) one Adam step (PyTorch
  defaults, state fresh each round) on W2, b2 with the calibration loss.
  A_i[c] = momentum A[c] + (1 - momentum) sums[c] / K for the classes seen.
  """
  y_params = [p.copy() for p in params]
  num_classes = len(anchors)
  sums = np.zeros_like(anchors)
  seen = np.zeros(num_classes, bool)
  adam_m = [np.zeros_like(y_params[2]), np.zeros_like(y_params[3])]
  adam_v = [np.zeros_like(m) for m in adam_m]
  num_batches, num_examples, steps = 0, 0, 0
  for xb, yb in batches:
    yb = np.asarray(yb, np.int64)
    f = np_features(y_params, xb)
    for c in np.unique(yb):
      sums[c] += f[yb == c].mean(axis=0)
      seen[c] = True
    _, grads = np_fedfa_loss_and_gradients(
        y_params, anchors, xb, yb, lam=lam, anchor_loss=anchor_loss
    )
    y_params = [p - lr * g for p, g in zip(y_params, grads)]
    if calibrate:
      _, cal_grads = np_calibration_loss_and_gradients(y_params, anchors)
      steps += 1
      for j, g in enumerate(cal_grads):
        adam_m[j] = ADAM_BETA1 * adam_m[j] + (1 - ADAM_BETA1) * g
        adam_v[j] = ADAM_BETA2 * adam_v[j] + (1 - ADAM_BETA2) * g**2
        m_hat = adam_m[j] / (1 - ADAM_BETA1**steps)
        v_hat = adam_v[j] / (1 - ADAM_BETA2**steps)
        y_params[2 + j] = y_params[2 + j] - ADAM_LR * m_hat / (
            np.sqrt(v_hat) + ADAM_EPS
        )
    num_batches += 1
    num_examples += len(yb)
  client_anchors = anchors.copy()
  if num_batches:
    client_anchors[seen] = (
        momentum * anchors[seen] + (1 - momentum) * sums[seen] / num_batches
    )
  return y_params, client_anchors, num_examples


def np_fedfa_round(
    params,
    anchors,
    client_batches_list,
    *,
    lr,
    server_lr,
    lam,
    momentum,
    anchor_loss,
    calibrate,
):
  """x+ = x + server_lr mean_i (y_i - x), A+ = sum_i n_i A_i / sum_i n_i over
  the clients with data (both kept without one); returns (x+, A+, sum n_i)."""
  results = [
      np_fedfa_client(
          params,
          anchors,
          batches,
          lr=lr,
          lam=lam,
          momentum=momentum,
          anchor_loss=anchor_loss,
          calibrate=calibrate,
      )
      for batches in client_batches_list
  ]
  results = [r for r in results if r[2] > 0]
  if not results:
    return [p.copy() for p in params], anchors.copy(), 0.0
  new_params = [
      p + server_lr * np.mean([r[0][j] - p for r in results], axis=0)
      for j, p in enumerate(params)
  ]
  total = float(sum(r[2] for r in results))
  new_anchors = sum(r[2] * r[1] for r in results) / total
  return new_params, new_anchors, total


def np_finite_difference_errors(seed=0, lam=0.3, eps=1e-6):
  """Max relative errors of the hand gradients vs central differences.

  A self-check (not a test): returns (CE + anchor loss error over all four
  parameters, calibration loss error over W2, b2) on a random batch.
  """
  rng = np.random.default_rng(seed)
  params = [p + 0.1 * rng.normal(size=p.shape) for p in np_initial_params()]
  anchors = np_initial_anchors() + 0.2 * rng.normal(size=(3, NUM_HIDDEN))
  x = rng.normal(size=(7, sref.NUM_FEATURES))
  y = rng.integers(0, sref.NUM_CLASSES, size=7)

  def errors(loss_fn, grads, indices):
    worst = 0.0
    for j, g in zip(indices, grads):
      numeric = np.zeros_like(g)
      for k in np.ndindex(g.shape):
        shifted = [[p.copy() for p in params] for _ in range(2)]
        shifted[0][j][k] += eps
        shifted[1][j][k] -= eps
        numeric[k] = (loss_fn(shifted[0]) - loss_fn(shifted[1])) / (2 * eps)
      scale = max(np.max(np.abs(numeric)), 1e-12)
      worst = max(worst, np.max(np.abs(numeric - g)) / scale)
    return worst

  loss = lambda p: np_fedfa_loss_and_gradients(
      p, anchors, x, y, lam=lam, anchor_loss=True
  )[0]
  _, grads = np_fedfa_loss_and_gradients(
      params, anchors, x, y, lam=lam, anchor_loss=True
  )
  calibration = lambda p: np_calibration_loss_and_gradients(p, anchors)[0]
  _, cal_grads = np_calibration_loss_and_gradients(params, anchors)
  return errors(loss, grads, range(4)), errors(calibration, cal_grads, (2, 3))
