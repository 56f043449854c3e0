"""The names each choice flag accepts, importable without TensorFlow.

One home for the choices that `scripts/run_experiment.py` checks before it
imports TensorFlow (`tff_fedwin.experiments.config.validate_config`); the
modules that implement them (`tasks.registry`, `tasks.image_models`,
`data.leaf`, `data.sources`, `algorithms.client_training`,
`aggregators.window_math`, `training.client_state_stores`) take them from here.
Like `checks`, a leaf every package may import.
"""

# --task: the tasks of `tff_fedwin.tasks.registry`.
TASKS = (
    'mnist',
    'npz',
    'leaf',
    'text',
    'emnist',
    'shakespeare',
    'stackoverflow',
)
# Tasks whose test sets have clients (`--eval_per_client`, `Task.test_clients`).
TASKS_WITH_TEST_CLIENTS = (
    'leaf',
    'text',
    'shakespeare',
    'emnist',
    'stackoverflow',
)
# Tasks whose labels are one class per example (WSM's class proportions).
CLASSIFICATION_TASKS = ('mnist', 'npz', 'leaf', 'emnist')
# The LEAF datasets `tff_fedwin.data.leaf` reads.
LEAF_DATA_KINDS = (
    'femnist',
    'shakespeare',
    'synthetic',
    'sent140',
    'celeba',
    'reddit',
)
# --leaf_kind: what the LEAF directory holds; 'auto' recognizes it.
LEAF_KINDS = ('auto', *LEAF_DATA_KINDS)
# --text_level: next-word or next-character prediction.
TEXT_LEVELS = ('word', 'char')
# --text_tokenizer: how word-level text is cut into words
# (`tff_fedwin.data.text_vocab.TOKENIZERS`).
TEXT_TOKENIZERS = ('words', 'whitespace')
# --text_model: the text task's LSTM, TFF's StackOverflow sizes or smaller
# (`tff_fedwin.tasks.text.TEXT_MODEL_SIZES`).
TEXT_MODELS = ('tff', 'small')
# --stackoverflow_test_batches by default: the first 100 batches of TFF's
# StackOverflow test set (all 16.6M examples take hours on a CPU).
STACKOVERFLOW_TEST_BATCHES = 100
# --max_npz_bytes=0 (the default): this fraction of the memory available at
# the start (MemAvailable, else the physical memory) caps what a .npz's
# arrays may decompress to.
NPZ_MEMORY_FRACTION = 0.5
# --model (besides 'auto'): `tff_fedwin.tasks.image_models`.
IMAGE_MODELS = (
    'cnn',
    'cnn_dropout',
    'leaf_cnn',
    'ima_cnn',
    'resnet18_gn',
    'resnet20_gn',
)
# The models with dropout layers (`tff_fedwin.tasks.stateless_dropout`), and
# the tasks whose default model is one.
DROPOUT_MODELS = ('cnn_dropout',)
DROPOUT_DEFAULT_TASKS = ('emnist', 'leaf')
# scripts/benchmark.py --model_family: the model the rounds train
# (`benchmarks.model_families`, the checkout's top-level `benchmarks/`, which
# this package does not import).
BENCHMARK_MODEL_FAMILIES = ('cnn', 'word_lstm', 'char_lstm')
# --eval_split: the held-out splits ('validation': `mnist`'s, or `leaf`'s
# `val/` folder).
MNIST_HELD_OUT_SPLITS = ('test', 'validation')
# --client_loss: plain cross-entropy or WSM's re-weighted softmax.
CLIENT_LOSSES = ('ce', 'wsm')
# --window_mode: 'evaluate' (WiMA), 'broadcast' (IMA).
WINDOW_MODES = ('evaluate', 'broadcast')
# --window_part: which part of the evaluated model is the window's (WiMA
# Table 5): all of it, the classifier (last layer) only, or the feature
# extractor (all but the last layer) only; the rest is the global model's.
WINDOW_PARTS = ('all', 'classifier', 'features')
# --client_sharpness (besides 'none'): the clients' sharpness-aware step,
# SAM (FedSAM) or ASAM (FedASAM) (`tff_fedwin.algorithms.sharpness`).
SHARPNESS_KINDS = ('sam', 'asam')
# The --algorithm values with a model-sized state per client (the
# `tff_fedwin.algorithms.client_state` family).
CLIENT_STATE_ALGORITHMS = ('scaffold', 'feddyn', 'adabest')
# All --algorithm values built by `build_client_state_process`: those and the
# ones whose server sends the clients a vector but keeps none per client.
CLIENT_STATE_FAMILY = (
    *CLIENT_STATE_ALGORITHMS,
    'fedcm',
    'fedacg',
    'mime',
    'fedgma',
    'fedfa',
)
# --client_states: where their per-client states live.
CLIENT_STATE_KINDS = ('auto', 'memory', 'disk')
