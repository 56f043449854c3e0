"""The window papers' algorithm tables and ablations at our scale, as configs.

`papers.paper_experiments` adds them, with `base` its 40-round MNIST
configuration and `tuned` its `papers.TUNED` (FedAvgM's tuned server rate),
the ablations built from its own rows so that the rows they share with
another experiment are the same configs (one run, `papers.shared_runs`):

* `wima_algorithms` (WiMA Table 2): every algorithm with a W = 10 window,
  evaluate mode, alpha = 0.05;
* `wima_swa_start` (WiMA Fig. 2): WiMA against server-side SWA from several
  start rounds;
* `algorithm_flags` and `IMA_TABLE_ALGORITHMS`: the rows of IMA Table 1's
  experiment (`papers`' `ima_algorithms`);
* `wima_window_part` (WiMA Table 5): the window over the whole model, over
  the classifier only and over the feature extractor only
  (`--window_part`, docs/design.md "The window over part of the model"), on
  `mnist_wima`'s FedAvg rows; evaluate mode, so the three rows of an alpha
  train the same trajectory;
* `ima_decays` (IMA Table 3): IMA on FedAvg with the client decay schemes
  from t_s on: exponential (IMA's own, `ima`), a small constant rate
  (`ima_constant`), cyclic (`ima_cyclic`) and no additional decay (the
  baselines' 0.99^t, `decay`), beside `ima`'s no-window row;
* `ima_epoch_decay` (IMA Table 3's epoch decay, one local epoch fewer every
  20 of IMA's 100 rounds): it needs several epochs, so it is built on
  `ima_local_setup` (5 epochs, IMA from round 225 of 300): IMA, IMA with
  the baselines' 0.99^t only ("NA") and that with one epoch fewer every 15
  rounds (5, 4, 3, 2, 1 over IMA's 75 rounds, as the paper's 5 steps).
"""

from collections.abc import Mapping

import attrs

from tff_fedwin.experiments import config as config_lib

# WiMA Table 2's shape at our scale: the window (W = 10, evaluate mode: one
# run gives the algorithm's and the window's accuracy) on every algorithm,
# alpha = 0.05. Server rates: FedAvgM's tuned one; FedAdam's and FedYogi's
# IMA Table 5's eta = 0.01; the rest 1.0. FedSAM: SAM's rho = 0.05; FedASAM:
# IMA Table 5's rho = 0.2, eta = 0.05. FedAvg, FedAvgM and SCAFFOLD are
# mnist_wima's rows (the same configs: shared runs).
_SERVER_RATES = {'fedadam': 0.01, 'fedyogi': 0.01}
# IMA Table 1's algorithms that run here.
IMA_TABLE_ALGORITHMS = (
    'fedavg',
    'fedprox',
    'fedasam',
    'fednova',
    'fedgma',
    'fedfa',
    'fedadam',
    'fedyogi',
)
# The algorithms' own hyperparameters: from WiMA's tuning sets (sec. on
# tuning), not tuned here.
_ALGORITHM_HPARAMS = {
    'feddyn': dict(feddyn_alpha=0.01),
    'adabest': dict(adabest_mu=0.01, adabest_beta=0.9),
    'fedcm': dict(fedcm_alpha=0.1),
    'fedacg': dict(fedacg_lambda=0.85, fedacg_beta=0.001),
    # IMA Table 5's AND-mask threshold.
    'fedgma': dict(fedgma_threshold=0.8),
    # The IMA authors' code's lambda and calibration start (their rounds
    # t - 1 > R / 4; R = 40 in `ima_algorithms`: t >= 12); IMA Table 5's
    # anchor momentum (their code's default is 0.5).
    'fedfa': dict(
        fedfa_lambda=0.1, fedfa_momentum=0.9, fedfa_calibration_start_round=12
    ),
}
# Algorithms of IMA's Table 1 only, not WiMA's Table 2.
_IMA_ONLY = ('fedfa',)
# MIME's rows of WiMA Table 2: SGD (beta = 0) and SGDm (beta = 0.9), at
# server rate 1.0 as the rest; MIME SGD also at 0.1, the other value of
# WiMA's grid for it (eta_s in {0.1, 1}): at 1.0 it does not learn here.
_MIME_ROWS = {
    ' beta=0.0': dict(mime_beta=0.0),
    ' beta=0.0 slr=0.1': dict(mime_beta=0.0, server_learning_rate=0.1),
    ' beta=0.9': dict(mime_beta=0.9),
    # At most 200 examples (10 steps) per client and round: the largest
    # clients' drift that keeps MIME SGD at chance here (docs/design.md sec.
    # 4.9) capped.
    ' beta=0.0 max_elements=200': dict(mime_beta=0.0, client_max_elements=200),
}
_SHARPNESS_ROWS = {
    'fedsam': dict(client_sharpness='sam', sam_rho=0.05),
    'fedasam': dict(client_sharpness='asam', sam_rho=0.2, sam_eta=0.05),
}


def algorithm_flags(alg: str, alpha: float, tuned: Mapping[str, float]) -> dict:
  """The flags of a table row's algorithm `alg` (a `--algorithm`, or
  `fedsam`/`fedasam`: FedAvg with the sharpness flags) at `alpha`, with its
  server rate (`tuned`'s `'<alg> alpha=<alpha>'` if there, `papers.TUNED`)."""
  extra = _SHARPNESS_ROWS.get(alg, {})
  return dict(
      algorithm='fedavg' if extra else alg,
      dirichlet_alpha=alpha,
      server_learning_rate=tuned.get(
          f'{alg} alpha={alpha}', _SERVER_RATES.get(alg, 1.0)
      ),
      **extra,
      **_ALGORITHM_HPARAMS.get(alg, {}),
  )


# WiMA Table 2's setting at our scale, shared by `wima_algorithms` and
# `wima_swa_start`.
_WIMA_ALPHA = 0.05
_WIMA_WINDOW = 10


def wima_algorithms(base, tuned):
  """{row: config}: each algorithm with a W = 10 window at alpha = 0.05."""
  rows = {}
  for alg in (*config_lib.ALGORITHMS, *_SHARPNESS_ROWS):
    if alg in _IMA_ONLY:
      continue
    flags = algorithm_flags(alg, _WIMA_ALPHA, tuned)
    rate = flags['server_learning_rate']
    shown = f' slr={rate}' if alg in ('fedavgm', *_SERVER_RATES) else ''
    for name, extra in (_MIME_ROWS if alg == 'mime' else {'': {}}).items():
      variant, _, slr = name.partition(' slr=')
      shown_here = f' slr={slr}' if slr else shown
      label = f'{alg}{variant} alpha={_WIMA_ALPHA}{shown_here} W={_WIMA_WINDOW}'
      rows[label] = attrs.evolve(
          base, window_size=_WIMA_WINDOW, **{**flags, **extra}
      )
  return rows


# WiMA Fig. 2's comparison: SWA from these start rounds (of 40), cycle c.
SWA_START_ROUNDS = (10, 20, 30)
SWA_CYCLE = 5
# The round from which every row averages: SWA from t_s = 30 first averages
# at round t_s + c = 35.
_SWA_SUMMARY_FROM = max(SWA_START_ROUNDS) + SWA_CYCLE


def swa_start_rows() -> tuple[tuple[int, str, str], ...]:
  """`wima_swa_start`'s labels: ((t_s, WiMA row, SWA row), ...)."""
  prefix = f'fedavg alpha={_WIMA_ALPHA}'
  return tuple(
      (
          start,
          f'{prefix} WiMA W={_WIMA_WINDOW} t_s={start}',
          f'{prefix} SWA t_s={start} c={SWA_CYCLE}',
      )
      for start in SWA_START_ROUNDS
  )


def wima_swa_start(base, tuned):
  """{row: config}: WiMA Fig. 2 (WiMA vs SWA from several start rounds).

  FedAvg at `wima_algorithms`' alpha and W, per start round t_s in
  `SWA_START_ROUNDS`: WiMA, its window active from max(W, t_s)
  (docs/design.md sec. 1.2; evaluate mode: the run's global model is the
  plain FedAvg, and training does not depend on t_s, so the rows differ
  only before t_s), and SWA (a server-side read-out, sec. 1.14) from t_s
  with FedSWA's cyclic client rate, cycle c = 5 (the paper's c in {10, 20}
  of 10,000 rounds would leave t_s = 30 of 40 at most one average; c = 5
  gives 2, 4 and 6 averaged models for t_s = 30, 20, 10) and second rate
  lr * 1e-2. The summary covers the evals after round 35, where every row
  averages.
  """
  base = attrs.evolve(
      base,
      **algorithm_flags('fedavg', _WIMA_ALPHA, tuned),
      # The evals after round 35: 36, 38, 40.
      summary_last_n=base.total_rounds // base.rounds_per_eval
      - _SWA_SUMMARY_FROM // base.rounds_per_eval,
  )
  rows = {}
  for start, wima, swa in swa_start_rows():
    rows[wima] = attrs.evolve(
        base, window_size=_WIMA_WINDOW, window_start_round=start
    )
    rows[swa] = attrs.evolve(
        base,
        swa_start_round=start,
        swa_cycle=SWA_CYCLE,
        client_lr_schedule='swa_cyclic',
        client_lr_low=base.client_learning_rate / 100,
    )
  return rows


# WiMA Table 5's parts, besides the whole model ('all').
WINDOW_PARTS = ('classifier', 'features')
WINDOW_PART_ALPHAS = (0.0, 0.05)
# IMA sec. 7.3.2: "a small constant lr (i.e., lr is 5e-5 in IMA), cyclic lr
# decay (decaying lr from 1e-2 to 5e-5 every 20 rounds)"; of 400 rounds
# (IMA from 300). Here IMA runs the last 10 of 40 rounds: cycles of 5.
IMA_LOW_RATE = 5e-5
IMA_DECAY_CYCLE = 5
# Row suffix -> the flags the row changes on `ima`'s IMA row.
IMA_DECAY_SCHEMES = {
    'IMA': {},
    'IMA const lr': dict(
        client_lr_schedule='ima_constant', client_lr_low=IMA_LOW_RATE
    ),
    f'IMA cyclic c={IMA_DECAY_CYCLE}': dict(
        client_lr_schedule='ima_cyclic',
        client_lr_low=IMA_LOW_RATE,
        client_lr_cycle=IMA_DECAY_CYCLE,
    ),
    'IMA NA decay': dict(client_lr_schedule='decay'),
}
# `ima_epoch_decay`'s period: IMA's 20 of 100 rounds, here 15 of 75.
IMA_EPOCH_DECAY_EVERY = 15


def wima_window_part(
    mnist_wima: dict[str, config_lib.ExperimentConfig],
) -> dict[str, config_lib.ExperimentConfig]:
  """{row: config}: per alpha, `mnist_wima`'s FedAvg row (the whole model)
  and the same with the window over each of `WINDOW_PARTS` only."""
  rows = {}
  for alpha in WINDOW_PART_ALPHAS:
    whole = f'fedavg alpha={alpha} W=10'
    rows[whole] = mnist_wima[whole]
    for part in WINDOW_PARTS:
      rows[f'{whole} {part} only'] = attrs.evolve(
          mnist_wima[whole], window_part=part
      )
  return rows


def ima_decays(
    ima: dict[str, config_lib.ExperimentConfig],
) -> dict[str, config_lib.ExperimentConfig]:
  """{row: config}: `ima`'s FedAvg rows without a window and with IMA, and
  IMA with each other decay scheme of `IMA_DECAY_SCHEMES`."""
  rows = {'fedavg alpha=0.1 no window': ima['fedavg alpha=0.1 no window']}
  for suffix, flags in IMA_DECAY_SCHEMES.items():
    rows[f'fedavg alpha=0.1 {suffix}'] = attrs.evolve(
        ima['fedavg alpha=0.1 IMA'], **flags
    )
  return rows


def ima_epoch_decay(
    ima_local_setup: dict[str, config_lib.ExperimentConfig],
) -> dict[str, config_lib.ExperimentConfig]:
  """{row: config}: `ima_local_setup`'s FedAvg rows without a window and
  with IMA, IMA with no additional decay, and that with the epoch decay."""
  ima = ima_local_setup['fedavg alpha=0.1 IMA']
  na_decay = attrs.evolve(ima, client_lr_schedule='decay')
  return {
      'fedavg alpha=0.1 no window': ima_local_setup[
          'fedavg alpha=0.1 no window'
      ],
      'fedavg alpha=0.1 IMA': ima,
      'fedavg alpha=0.1 IMA NA decay': na_decay,
      f'fedavg alpha=0.1 IMA epoch decay P={IMA_EPOCH_DECAY_EVERY}': (
          attrs.evolve(
              na_decay, client_epochs_decay_every=IMA_EPOCH_DECAY_EVERY
          )
      ),
  }
