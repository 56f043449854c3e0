"""run_experiment.py's window flags: the window, IMA's schedules and SWA."""

from absl import flags

from tff_fedwin import experiments
from tff_fedwin.experiments import config as config_lib

_DEFAULTS = experiments.ExperimentConfig()

flags.DEFINE_integer(
    'window_size',
    _DEFAULTS.window_size,
    'W >= 1 models in the window; 0 = no window.',
)
flags.DEFINE_enum(
    'window_mode',
    _DEFAULTS.window_mode,
    list(experiments.WINDOW_MODES),
    'evaluate (WiMA) or broadcast (IMA).',
)
flags.DEFINE_integer(
    'window_start_round',
    _DEFAULTS.window_start_round,
    'Window model active from max(W, this round).',
)
flags.DEFINE_integer(
    'window_read_every',
    _DEFAULTS.window_read_every,
    'E: window model needed every E rounds (ceil(W/E) '
    'slots); set --rounds_per_eval to a multiple of it.',
)
flags.DEFINE_enum(
    'window_location',
    _DEFAULTS.window_location,
    list(experiments.WINDOW_LOCATIONS),
    'state: the window in the process state; program: kept by the '
    'round loop, its W models in files next to the checkpoints (state '
    'of one model, O(model) per round); auto: program above 32 MiB '
    'of window slots.',
)
flags.DEFINE_string(
    'window_sizes',
    _DEFAULTS.window_sizes,
    'More window sizes on the same trajectory, e.g. 5,50,200 besides '
    '--window_size=100: each evaluated (window_<W>/ columns), kept by the '
    'program, one set of round files for all.',
)
flags.DEFINE_enum(
    'window_part',
    _DEFAULTS.window_part,
    list(experiments.WINDOW_PARTS),
    "Which part of the evaluated window model is the window's (WiMA Table "
    '5): all; classifier, the last layer only; features, all but the last '
    "layer. The rest is the round's global model. Evaluate mode only.",
)
flags.DEFINE_enum(
    'client_lr_schedule',
    _DEFAULTS.client_lr_schedule,
    list(experiments.LR_SCHEDULES),
    "constant; decay: 0.99^t (IMA's baselines); or one of IMA's decay "
    'schemes, 0.99^t before --window_start_round and from it on: ima, 0.97 '
    'per round; ima_constant, --client_lr_low; ima_cyclic, from the rate at '
    '--window_start_round down to --client_lr_low over every '
    "--client_lr_cycle rounds; or swa_cyclic, FedSWA's cyclic rate from "
    '--swa_start_round on: (1 - a) lr + a --client_lr_low, a = ((t - 1) mod '
    '--swa_cycle + 1) / --swa_cycle. With '
    f'{", ".join(config_lib.CLIENT_SCHEDULE_ALGORITHMS)}.',
)
flags.DEFINE_float(
    'client_lr_low',
    _DEFAULTS.client_lr_low,
    'The client rate of --client_lr_schedule=ima_constant and the bottom '
    "of each cycle of ima_cyclic (IMA Table 3's 5e-5) and of swa_cyclic "
    "(FedSWA's --swa-lr, 1e-4 in its code).",
)
flags.DEFINE_integer(
    'client_lr_cycle',
    _DEFAULTS.client_lr_cycle,
    'Rounds per cycle of --client_lr_schedule=ima_cyclic (>= 2).',
)
flags.DEFINE_integer(
    'swa_start_round',
    _DEFAULTS.swa_start_round,
    "Server-side SWA (FedSWA, WiMA's comparison) from this round t_s on: the "
    'global models of rounds t_s + k --swa_cycle (k >= 1) are averaged and '
    'evaluated as the window/ model; the clients keep the global model. '
    "t_s = the authors' swa_start + 1 (their default: int(0.75 "
    '--total_rounds) + 1). 0 = off; not with --window_size.',
)
flags.DEFINE_integer(
    'swa_cycle',
    _DEFAULTS.swa_cycle,
    'c >= 1: rounds between two models SWA averages, and the cycle of '
    "--client_lr_schedule=swa_cyclic (>= 2 there); FedSWA's --swa-c.",
)
