"""The version of tff_fedwin, and of the rules that decide a run's numbers."""

__version__ = '0.2.0'

# The rule that draws every dropout mask of the package's models
# (`tff_fedwin.tasks.stateless_dropout`). A run records it in
# `run_config.json`; a resume across a change is refused
# (`tff_fedwin.experiments.run_record`).
DROPOUT_MASKS = 'stateless-fingerprint-1'
# What a run recorded before it recorded `DROPOUT_MASKS`: Keras' stateful
# `Dropout`, whose masks depend on what the worker ran before.
STATEFUL_DROPOUT_MASKS = 'keras-stateful'

# The rule that orders each client's examples in a round
# (`tff_fedwin.training.sampling.client_shuffle_seed`): a shuffle seeded from
# (run seed, round, client). Recorded and checked as `DROPOUT_MASKS`.
CLIENT_SHUFFLE = 'per-round-sha256-1'
# What a run recorded before it recorded `CLIENT_SHUFFLE`: the run seed
# alone, the same order every round a client was picked.
FIXED_CLIENT_SHUFFLE = 'fixed-seed'

# The rule that sizes the classifier of `--task=leaf`'s FEMNIST-style rows:
# 1 + the largest label (or `--num_classes`). Recorded and checked as
# `DROPOUT_MASKS`.
LEAF_CLASSES = 'from-labels-1'
# What a run recorded before it recorded `LEAF_CLASSES`: always 62 outputs.
FIXED_LEAF_CLASSES = 'femnist-62'
