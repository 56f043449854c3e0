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
