"""run_experiment.py's algorithm flags: the algorithm, its loss, its terms."""

from absl import flags

from tff_fedwin import experiments

_DEFAULTS = experiments.ExperimentConfig()

flags.DEFINE_enum(
    'algorithm',
    _DEFAULTS.algorithm,
    list(experiments.ALGORITHMS),
    'Federated algorithm.',
)
flags.DEFINE_enum(
    'client_loss',
    _DEFAULTS.client_loss,
    list(experiments.CLIENT_LOSSES),
    'ce or WSM re-weighted CE.',
)
flags.DEFINE_float(
    'proximal_strength',
    _DEFAULTS.proximal_strength,
    'FedProx mu (--algorithm=fedprox).',
)
flags.DEFINE_float(
    'feddyn_alpha',
    _DEFAULTS.feddyn_alpha,
    'FedDyn alpha > 0, the weight of its dynamic regularizer; required with '
    '--algorithm=feddyn (WiMA tunes it in {0.01, 0.001}).',
)
flags.DEFINE_float(
    'adabest_mu',
    _DEFAULTS.adabest_mu,
    'AdaBest mu > 0, the weight of the new drift in h_i; required with '
    '--algorithm=adabest (WiMA tunes it in {0.01, 0.02}).',
)
flags.DEFINE_float(
    'adabest_beta',
    _DEFAULTS.adabest_beta,
    "AdaBest beta in [0, 1), the server's bias correction; required with "
    '--algorithm=adabest (WiMA: {0.5, 0.6, 0.7, 0.8, 0.9, 0.95}).',
)
flags.DEFINE_float(
    'fedcm_alpha',
    _DEFAULTS.fedcm_alpha,
    "FedCM alpha in (0, 1], the weight of a client's own gradient against "
    'the global estimate; required with --algorithm=fedcm (WiMA tunes it in '
    '{0.05, 0.1, 0.5}).',
)
flags.DEFINE_float(
    'fedacg_lambda',
    _DEFAULTS.fedacg_lambda,
    "FedACG lambda in [0, 1), the server momentum and the clients' "
    'lookahead; required with --algorithm=fedacg (WiMA: {0.8, 0.85, 0.9}).',
)
flags.DEFINE_float(
    'fedacg_beta',
    _DEFAULTS.fedacg_beta,
    'FedACG beta >= 0, its proximal term (beta/2)||w - lookahead||^2; '
    'required with --algorithm=fedacg (WiMA: {0.01, 0.001}).',
)
flags.DEFINE_float(
    'mime_beta',
    _DEFAULTS.mime_beta,
    "MIME's momentum beta in [0, 1), of the server optimizer state every "
    'local step uses; 0 is MIME with SGD; required with --algorithm=mime '
    '(WiMA: 0 for MIME SGD, 0.9 for MIME SGDm).',
)
flags.DEFINE_float(
    'fedgma_threshold',
    _DEFAULTS.fedgma_threshold,
    "FedGMA's mask threshold tau in [0, 1]: a coordinate of the mean update "
    "whose clients' sign agreement is above tau counts fully, the others "
    'scaled by their agreement; required with --algorithm=fedgma (IMA: 0.8).',
)
flags.DEFINE_float(
    'fedfa_lambda',
    _DEFAULTS.fedfa_lambda,
    "FedFA's anchor-loss weight lambda >= 0; required with --algorithm=fedfa "
    "(the IMA authors' code: 0.1).",
)
flags.DEFINE_float(
    'fedfa_momentum',
    _DEFAULTS.fedfa_momentum,
    "FedFA's anchor momentum m in [0, 1]; required with --algorithm=fedfa "
    "(the IMA authors' code: 0.5; IMA Table 5: 0.9).",
)
flags.DEFINE_integer(
    'fedfa_calibration_start_round',
    _DEFAULTS.fedfa_calibration_start_round,
    'FedFA calibrates the classifier on the anchors in the rounds t >= this '
    "(>= 1); required with --algorithm=fedfa (the IMA authors' code: "
    'floor(R / 4) + 2 of R rounds).',
)
