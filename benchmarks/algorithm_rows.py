"""The rows of the algorithms added on the shared machinery (issue 66).

Each row is timed against FedAvg's bound (`--paired`: interleaved with it and
with `FedAvg via build_fed_win`), so a row's "x own bound" divided by
FedAvg's is its round's cost relative to FedAvg's in the same minutes. The
hyperparameters are the papers' tables' (`experiments/papers.py`).

Without TensorFlow at import: `scripts/benchmark.py` lists the rows (and
checks `--rows`) first; a row imports what it builds when it runs.
"""

# (name, what `_process` builds): FedAvg-family rows through `build_fed_win`,
# the client-state family's through its builders.
ROWS = (
    ('FedNova via build_fed_win', 'fednova'),
    ('FedSAM clients via build_fed_win (rho 0.05)', 'fedsam'),
    ('FedASAM clients via build_fed_win (rho 0.2, eta 0.05)', 'fedasam'),
    ('FedDyn (alpha 0.01), client states as TFF values', 'feddyn'),
    ('FedDyn (alpha 0.01), client states as files', 'feddyn_files'),
    ('AdaBest (mu 0.01, beta 0.9), client states as files', 'adabest_files'),
    ('FedCM (alpha 0.1)', 'fedcm'),
    ('FedACG (lambda 0.85, beta 0.001)', 'fedacg'),
    ('MIME SGDm (beta 0.9)', 'mime'),
    ('FedGMA (threshold 0.8)', 'fedgma'),
    ('FedFA (lambda 0.1, momentum 0.9, calibrating)', 'fedfa'),
)


def _timed(kind: str, model, sgd, learning_rate: float):
  """The row's `rounds.*_row` for `kind` (imports TensorFlow)."""
  # pylint: disable=g-import-not-at-top
  from benchmarks import rounds as bench
  from tff_fedwin import algorithms

  if kind in ('feddyn', 'feddyn_files', 'adabest_files'):
    return bench.scaffold_row(
        model.model_fn,
        learning_rate,
        'values' if kind == 'feddyn' else 'files',
        algorithm=(
            algorithms.AdaBest(0.01, 0.9)
            if kind == 'adabest_files'
            else algorithms.FedDyn(0.01)
        ),
    )
  fed_win_options = {
      'fednova': dict(fednova=algorithms.build_fednova()),
      'fedsam': dict(client_sharpness=algorithms.build_sharpness('sam', 0.05)),
      'fedasam': dict(
          client_sharpness=algorithms.build_sharpness('asam', 0.2, 0.05)
      ),
  }
  if kind in fed_win_options:
    return bench.learning_process_row(
        lambda: algorithms.build_fed_win(
            model.model_fn, sgd(), **fed_win_options[kind]
        )
    )
  builders = {
      'fedcm': lambda: algorithms.build_fedcm(
          model.model_fn, alpha=0.1, **shared
      ),
      'fedacg': lambda: algorithms.build_fedacg(
          model.model_fn, lookahead=0.85, proximal_strength=0.001, **shared
      ),
      'mime': lambda: algorithms.build_mime(model.model_fn, beta=0.9, **shared),
      'fedgma': lambda: algorithms.build_fedgma(
          model.model_fn, threshold=0.8, **shared
      ),
      # From round 1 on: every step with the calibration, FedFA's dearest.
      'fedfa': lambda: algorithms.build_fedfa(
          model.feature_model_fn,
          anchor_lambda=0.1,
          anchor_momentum=0.9,
          calibration_start_round=1,
          **shared,
      ),
  }
  shared = dict(client_learning_rate=learning_rate, total_clients=1)
  return bench.learning_process_row(builders[kind])


# Rows whose client step reads the features (the family's `feature_model_fn`).
_NEEDS_FEATURES = ('fedfa',)


def algorithm_rows(
    row, model, sgd, learning_rate: float, bound: str, features: bool
) -> list:
  """`row(name, build, own_bound=bound)` for each of `ROWS` on `model` (a
  `model_families` family, read when the row runs); FedFA's row only when
  `features` (the family has a `feature_model_fn`)."""
  return [
      row(
          name,
          lambda kind=kind: _timed(kind, model(), sgd, learning_rate),
          own_bound=bound,
      )
      for name, kind in ROWS
      if features or kind not in _NEEDS_FEATURES
  ]
