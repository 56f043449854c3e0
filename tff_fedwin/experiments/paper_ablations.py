"""The papers' ablations at our scale, as configurations.

`papers.paper_experiments` adds them, built from its own rows so that the
rows they share with another experiment are the same configs (one run,
`papers.shared_runs`):

* `wima_window_part` (WiMA Table 5): the window over the whole model, over
  the classifier only and over the feature extractor only
  (`--window_part`, docs/design.md "The window over part of the model"), on
  `mnist_wima`'s FedAvg rows; evaluate mode, so the three rows of an alpha
  train the same trajectory.
* `ima_decays` (IMA Table 3): IMA on FedAvg with the client decay schemes
  from t_s on: exponential (IMA's own, `ima`), a small constant rate
  (`ima_constant`), cyclic (`ima_cyclic`) and no additional decay (the
  baselines' 0.99^t, `decay`), beside `ima`'s no-window row.
* `ima_epoch_decay` (IMA Table 3's epoch decay, one local epoch fewer every
  20 of IMA's 100 rounds): it needs several epochs, so it is built on
  `ima_local_setup` (5 epochs, IMA from round 225 of 300): IMA, IMA with
  the baselines' 0.99^t only ("NA") and that with one epoch fewer every 15
  rounds (5, 4, 3, 2, 1 over IMA's 75 rounds, as the paper's 5 steps).
"""

import attrs

from tff_fedwin.experiments import config as config_lib

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
