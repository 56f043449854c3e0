"""The flags reach the processes: whole runs against numpy of each algorithm.

Each case runs `run_experiment` (the code path of the flags) for 3 rounds on a
tiny `.npz` task and compares the test loss it reports for the global model
(and the window model) after every round with the loss of the model numpy
computes from the algorithm's equations (wiring_reference.py, float64). The
loss is read from the run's summary, so the check does not depend on how a
process lays out its state; it is a smooth function of all the weights, and a
mis-wired flag (FedAvgM without server momentum, FedAdam built as SGD, WSM
clients on plain cross-entropy, a dropped server learning rate, ...) moves it by
1e-3 or more, 100 times the tolerance.

The expectation is independent of the code under test: the reference follows
the papers and TFF's documented optimizer updates, and takes from the task only
its inputs (the initial weights and which examples each client holds). The
task makes the order of the examples irrelevant: 4 clients of 6 examples each
(Dirichlet alpha = inf splits every class equally), batch size 6 and 3 epochs,
so each of the 3 local steps of a round uses a client's whole data; all clients
take part in every round. The runs use the session's TFF worker
(session_worker.py), not one each.
"""

import collections
import csv
import os

import numpy as np
import pytest
import tensorflow_federated as tff

from tests.experiments import session_worker
from tests.experiments import wiring_reference as ref
from tests.experiments import wiring_reference_family as family_ref
from tff_fedwin.tasks import registry
from tff_fedwin import experiments

INPUT_DIM = 5
HIDDEN = 128  # The npz task's MLP for 1-D features.
CLASS_COUNTS = (12, 8, 4)  # Per client: 3, 2, 1 (WSM beta = 1/2, 1/3, 1/6).
NUM_CLIENTS = 4
CLIENT_SIZE = sum(CLASS_COUNTS) // NUM_CLIENTS
EPOCHS = 3
NUM_TEST = 60
ROUNDS = 3
CLIENT_LR = 0.3
PROXIMAL_STRENGTH = 1.0  # Set in every case: only FedProx may use it.
# float32 training vs the float64 reference: the losses agree to 4e-7 here;
# each mis-wiring tried (see the module docstring) moves them by 1.5e-3 or more.
RTOL = 1e-5

BASE_FLAGS = dict(
    task='npz',
    num_clients=NUM_CLIENTS,
    dirichlet_alpha=float('inf'),
    clients_per_round=NUM_CLIENTS,
    total_rounds=ROUNDS,
    client_epochs=EPOCHS,
    client_batch_size=CLIENT_SIZE,
    client_learning_rate=CLIENT_LR,
    proximal_strength=PROXIMAL_STRENGTH,
    rounds_per_eval=1,
    rounds_per_checkpoint=ROUNDS,
    summary_last_n=ROUNDS,
    seed=0,
)

Inputs = collections.namedtuple(
    'Inputs', ['model', 'initial_weights', 'client_batches', 'x_test', 'y_test']
)


@pytest.fixture(scope='module')
def data_npz(tmp_path_factory):
  """Features around a mean per class, so that a few rounds learn."""
  rng = np.random.default_rng(5)
  path = str(tmp_path_factory.mktemp('data') / 'wiring.npz')
  class_means = rng.normal(size=(len(CLASS_COUNTS), INPUT_DIM))
  y_train = np.repeat(np.arange(len(CLASS_COUNTS)), CLASS_COUNTS)
  y_test = np.arange(NUM_TEST) % len(CLASS_COUNTS)

  def features(y):
    noise = rng.normal(size=(len(y), INPUT_DIM))
    return (class_means[y] + noise).astype(np.float32)

  np.savez(
      path,
      x_train=features(y_train),
      y_train=y_train,
      x_test=features(y_test),
      y_test=y_test,
  )
  return path


@pytest.fixture(scope='module')
def inputs(data_npz):
  """The reference's inputs, from the task the runs build and the file."""
  task = registry.create_task(
      'npz',
      batch_size=CLIENT_SIZE,
      epochs=EPOCHS,
      seed=BASE_FLAGS['seed'],
      num_clients=NUM_CLIENTS,
      dirichlet_alpha=BASE_FLAGS['dirichlet_alpha'],
      data_npz=data_npz,
  )
  weights = tff.learning.models.ModelWeights.from_model(task.model_fn())
  initial = np.concatenate(
      [np.asarray(v, np.float64).ravel() for v in weights.trainable]
  )
  client_batches = []
  for client_id in task.train_data.client_ids:
    examples = list(
        task.train_data.create_tf_dataset_for_client(
            client_id
        ).as_numpy_iterator()
    )
    assert len(examples) == CLIENT_SIZE  # One batch is a client's whole data.
    x = np.stack([e['x'] for e in examples]).astype(np.float64)
    y = np.array([e['y'] for e in examples], np.int64)
    client_batches.append([(x, y)] * EPOCHS)
  with np.load(data_npz) as f:
    x_test, y_test = f['x_test'].astype(np.float64), f['y_test']
  model = ref.Mlp(INPUT_DIM, HIDDEN, len(CLASS_COUNTS))
  assert initial.size == INPUT_DIM * HIDDEN + HIDDEN + (HIDDEN + 1) * len(
      CLASS_COUNTS
  )
  return Inputs(model, initial, client_batches, x_test, y_test)


def _fedavg_family(
    server_optimizer_fn,
    *,
    client_loss='ce',
    proximal_strength=0.0,
    client_learning_rates=None,
    client_momentum=0.0,
    weight_decay=0.0,
    ima_window=None,
    sharpness=None,
    fednova=False,
    round_batches=None,
):
  """`inputs -> ([w^0, ..., w^T], IMA's aggregates a^1..a^T or None)`."""

  def expected(inputs):
    aggregates = None if ima_window is None else []
    models = ref.fedavg_family(
        inputs.model,
        inputs.initial_weights,
        inputs.client_batches,
        rounds=ROUNDS,
        server_optimizer=server_optimizer_fn(),
        client_learning_rates=client_learning_rates or [CLIENT_LR] * ROUNDS,
        client_loss=client_loss,
        proximal_strength=proximal_strength,
        client_momentum=client_momentum,
        weight_decay=weight_decay,
        sharpness=sharpness,
        ima_window=ima_window,
        fednova=fednova,
        aggregates=aggregates,
        round_batches=round_batches,
    )
    return models, aggregates

  return expected


def _scaffold(
    server_learning_rate, client_loss='ce', weight_decay=0.0, sharpness=None
):
  def expected(inputs):
    models = ref.scaffold(
        inputs.model,
        inputs.initial_weights,
        inputs.client_batches,
        rounds=ROUNDS,
        client_learning_rate=CLIENT_LR,
        server_learning_rate=server_learning_rate,
        client_loss=client_loss,
        weight_decay=weight_decay,
        sharpness=sharpness,
    )
    return models, None

  return expected


def _client_state_family(
    reference, server_learning_rate, client_learning_rate=CLIENT_LR, **kwargs
):
  """`inputs -> (models, IMA's aggregates or None)` of a family algorithm's
  `wiring_reference_family` function (`family_ref.feddyn`, ...) with `kwargs` (its
  hyperparameters, `client_loss`, `ima_window` where it takes one), lr_l
  `client_learning_rate` (or a schedule's rates per round)."""

  def expected(inputs):
    if kwargs.get('ima_window') is not None:
      kwargs['aggregates'] = []
    models = reference(
        inputs.model,
        inputs.initial_weights,
        inputs.client_batches,
        rounds=ROUNDS,
        client_learning_rate=client_learning_rate,
        server_learning_rate=server_learning_rate,
        **kwargs,
    )
    return models, kwargs.get('aggregates')

  return expected


# IMA's client schedule (IMA code, Table 7), with t_s = 2: lr0 0.99^t before
# round t_s, lr0 0.99^t_s 0.97^(t - t_s) from it on; rounds t = 1, 2, 3.
IMA_START = 2
IMA_LEARNING_RATES = [
    CLIENT_LR * 0.99,
    CLIENT_LR * 0.99**2,
    CLIENT_LR * 0.99**2 * 0.97,
]
# --client_lr_schedule=decay: lr0 * 0.99^t, rounds 1-3.
DECAY_LEARNING_RATES = [CLIENT_LR * 0.99**t for t in (1, 2, 3)]
# IMA Table 3's other schemes from t_s = 2 (lr0 0.99^t before it).
# ima_constant, low 0.05: 0.05 from round 2 on.
IMA_LOW = 0.05
IMA_CONSTANT_LEARNING_RATES = [CLIENT_LR * 0.99, IMA_LOW, IMA_LOW]
# ima_cyclic, low 0.1, cycle 2: from lr_max = 0.3 * 0.99^2 at round 2 down to
# 0.1 at round 3.
IMA_CYCLIC_LOW = 0.1
IMA_CYCLIC_LEARNING_RATES = [CLIENT_LR * 0.99, CLIENT_LR * 0.99**2, 0.1]
# swa_cyclic, low 0.1, cycle 2, from t_s = 1 (FedSWA's schedule_cycling_lr,
# their round i = t - 1): a = (i mod 2 + 1) / 2 = 1/2, 1, 1/2; (1 - a) 0.3 +
# a 0.1 = 0.2, 0.1, 0.2.
SWA_CYCLIC_LOW = 0.1
SWA_CYCLIC_LEARNING_RATES = [0.2, 0.1, 0.2]
SCHEDULE_LEARNING_RATES = {
    'ima': IMA_LEARNING_RATES,
    'decay': DECAY_LEARNING_RATES,
    'ima_constant': IMA_CONSTANT_LEARNING_RATES,
    'ima_cyclic': IMA_CYCLIC_LEARNING_RATES,
    'swa_cyclic': SWA_CYCLIC_LEARNING_RATES,
}

# Every case sets its own server learning rate (none is 1.0, the default), so
# a dropped --server_learning_rate fails each of them.
#
# Runs each of which another holds whole are not made (2026-12-07, 47 -> 39
# runs). With the window kept by the program, or with server-side SWA, the
# algorithm's runner is built without a window (registry._windowed_runner,
# build_runner) and only wrapped, so the no-window FedAvg (0.7), FedAvgM (0.5),
# Mime Lite (0.6), SCAFFOLD (0.9) and SCAFFOLD + WSM (0.9) are the runs of
# fedavg_swa, fedavgm_several_windows (auto: the program, for its extra
# sizes), mime_lite_program_window, scaffold_program_window_features_only and
# scaffold_wsm_program_window, whose global losses are checked against the
# same numpy; a window in the program without extra sizes is
# mime_lite_program_window's and the other *_program_window's. That an
# unwrapped runner without a window reports w^t as its window model is checked
# by every other case without a window (fedadam, fedyogi, fedavg_wsm,
# fedprox_wsm, fedsam, scaffold_disk_client_states, ...).
# Two more are taken pairwise (each pair of their factor levels still meets
# in another run): FedProx with cross-entropy is fedprox_ima_cyclic's,
# FedProx without a window or schedule fedprox_wsm's; client momentum with a
# constant rate, no window and server SGD 1.0 is
# fedavg_client_momentum_weight_decay's, momentum without weight decay
# fedavg_decay_client_momentum's (and fedadam_ima_client_momentum's).
CASES = [
    pytest.param(
        dict(algorithm='fedadam', server_learning_rate=0.01),
        _fedavg_family(lambda: ref.Adam(0.01)),
        id='fedadam',
    ),
    pytest.param(
        dict(algorithm='fedyogi', server_learning_rate=0.03),
        _fedavg_family(lambda: ref.Yogi(0.03)),
        id='fedyogi',
    ),
    pytest.param(
        dict(algorithm='fedavg', client_loss='wsm', server_learning_rate=0.7),
        _fedavg_family(lambda: ref.Sgd(0.7), client_loss='wsm'),
        id='fedavg_wsm',
    ),
    # FedProx Eq. 2: the clients add mu (w - w_global) to every gradient.
    # (TFF 0.87's build_weighted_fed_prox adds it with the opposite sign.)
    pytest.param(
        dict(algorithm='fedprox', client_loss='wsm', server_learning_rate=0.8),
        _fedavg_family(
            lambda: ref.Sgd(0.8),
            client_loss='wsm',
            proximal_strength=PROXIMAL_STRENGTH,
        ),
        id='fedprox_wsm',
    ),
    pytest.param(
        dict(
            algorithm='scaffold', server_learning_rate=0.9, client_states='disk'
        ),
        _scaffold(0.9),
        id='scaffold_disk_client_states',
    ),
    pytest.param(
        # The default with local workers is 'files' (the rows above).
        dict(
            algorithm='scaffold',
            server_learning_rate=0.9,
            client_state_transfer='values',
        ),
        _scaffold(0.9),
        id='scaffold_client_states_as_values',
    ),
    pytest.param(
        # The default with local workers is 'files' (every other row).
        dict(
            algorithm='scaffold',
            server_learning_rate=0.9,
            client_data_transfer='values',
        ),
        _scaffold(0.9),
        id='scaffold_client_data_as_values',
    ),
    pytest.param(
        dict(
            algorithm='fedavg',
            client_lr_schedule='ima',
            window_size=2,
            window_start_round=IMA_START,
            server_learning_rate=0.7,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.7), client_learning_rates=IMA_LEARNING_RATES
        ),
        id='fedavg_ima',
    ),
    # Client momentum (IMA's local setup) with the baselines' decay and with
    # the IMA schedule (with weight decay below).
    pytest.param(
        dict(
            algorithm='fedavg',
            client_lr_schedule='decay',
            client_momentum=0.9,
            server_learning_rate=0.8,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.8),
            client_learning_rates=DECAY_LEARNING_RATES,
            client_momentum=0.9,
        ),
        id='fedavg_decay_client_momentum',
    ),
    # IMA Table 3's epoch decay with IMA (W = 2 broadcast from t_s = 1),
    # P = 1: E_t = max(1, 3 - (t - 1)) = 3, 2, 1 epochs, one batch each; the
    # workers build the datasets from keys carrying the epochs.
    pytest.param(
        dict(
            algorithm='fedavg',
            client_lr_schedule='decay',
            window_size=2,
            window_mode='broadcast',
            window_start_round=1,
            client_epochs_decay_every=1,
            client_data_transfer='files',
        ),
        _fedavg_family(
            lambda: ref.Sgd(1.0),
            client_learning_rates=DECAY_LEARNING_RATES,
            ima_window=(2, 1),
            round_batches=[3, 2, 1],
        ),
        id='fedavg_ima_epoch_decay',
    ),
    pytest.param(
        dict(
            algorithm='fedavg',
            client_lr_schedule='ima_constant',
            client_lr_low=IMA_LOW,
            window_size=2,
            window_start_round=IMA_START,
            server_learning_rate=0.9,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.9),
            client_learning_rates=IMA_CONSTANT_LEARNING_RATES,
        ),
        id='fedavg_ima_constant',
    ),
    pytest.param(
        dict(
            algorithm='fedprox',
            client_lr_schedule='ima_cyclic',
            client_lr_low=IMA_CYCLIC_LOW,
            client_lr_cycle=2,
            window_size=2,
            window_start_round=IMA_START,
            server_learning_rate=0.9,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.9),
            proximal_strength=PROXIMAL_STRENGTH,
            client_learning_rates=IMA_CYCLIC_LEARNING_RATES,
        ),
        id='fedprox_ima_cyclic',
    ),
    pytest.param(
        dict(
            algorithm='fedadam',
            client_lr_schedule='ima',
            client_momentum=0.5,
            window_size=2,
            window_start_round=IMA_START,
            server_learning_rate=0.01,
        ),
        _fedavg_family(
            lambda: ref.Adam(0.01),
            client_learning_rates=IMA_LEARNING_RATES,
            client_momentum=0.5,
        ),
        id='fedadam_ima_client_momentum',
    ),
    # The window kept by the program (ProgramWindowRunner): the same numbers;
    # the IMA schedule still reads the start round; Mime Lite with a server
    # learning rate other than 1 (below). The base optimizer (client SGD) has
    # no state, so Mime Lite's local steps are plain SGD and its server step
    # SGD on the mean update.
    pytest.param(
        dict(
            algorithm='fedavg',
            client_lr_schedule='ima',
            window_size=2,
            window_start_round=IMA_START,
            window_location='program',
            server_learning_rate=0.7,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.7), client_learning_rates=IMA_LEARNING_RATES
        ),
        id='fedavg_ima_program_window',
    ),
    # Several windows on one trajectory (--window_sizes): each its own mean;
    # `auto` keeps them in the program.
    pytest.param(
        dict(
            algorithm='fedavgm',
            window_size=2,
            window_sizes='3,1',
            server_learning_rate=0.5,
        ),
        _fedavg_family(lambda: ref.Sgd(0.5, momentum=0.9)),
        id='fedavgm_several_windows',
    ),
    # ... and read from the window in the state: build_fed_win's finalizer,
    # the factory in TFF's Mime Lite (server SGD 1.0), SCAFFOLD's window.
    pytest.param(
        dict(
            algorithm='fedavgm',
            window_size=3,
            window_sizes='2,1',
            window_location='state',
            server_learning_rate=0.5,
        ),
        _fedavg_family(lambda: ref.Sgd(0.5, momentum=0.9)),
        id='fedavgm_several_windows_in_state',
    ),
    pytest.param(
        dict(
            algorithm='mime_lite',
            window_size=3,
            window_sizes='1,2',
            window_location='state',
            server_learning_rate=1.0,
        ),
        _fedavg_family(lambda: ref.Sgd(1.0)),
        id='mime_lite_several_windows_in_state',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            window_size=3,
            window_sizes='2',
            window_location='state',
            server_learning_rate=0.9,
        ),
        _scaffold(0.9),
        id='scaffold_several_windows_in_state',
    ),
    pytest.param(
        dict(
            algorithm='mime_lite',
            window_size=2,
            window_location='program',
            server_learning_rate=0.6,
        ),
        _fedavg_family(lambda: ref.Sgd(0.6)),
        id='mime_lite_program_window',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            client_loss='wsm',
            window_size=2,
            window_location='program',
            server_learning_rate=0.9,
        ),
        _scaffold(0.9, client_loss='wsm'),
        id='scaffold_wsm_program_window',
    ),
    # Client weight decay (the IMA authors' 0.001, larger here to show):
    # with client momentum, and in SCAFFOLD + WSM.
    pytest.param(
        dict(algorithm='fedavg', client_momentum=0.9, client_weight_decay=0.05),
        _fedavg_family(
            lambda: ref.Sgd(1.0), client_momentum=0.9, weight_decay=0.05
        ),
        id='fedavg_client_momentum_weight_decay',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            client_loss='wsm',
            client_weight_decay=0.05,
            server_learning_rate=0.9,
        ),
        _scaffold(0.9, client_loss='wsm', weight_decay=0.05),
        id='scaffold_wsm_weight_decay',
    ),
    # IMA (broadcast) with server SGD 1.0: the `aggregate/` columns are the
    # example-weighted mean of the round's client models; the window in the
    # state and kept by the program.
    pytest.param(
        dict(
            algorithm='fedavg',
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
        ),
        _fedavg_family(lambda: ref.Sgd(1.0), ima_window=(2, IMA_START)),
        id='fedavg_ima_broadcast',
    ),
    pytest.param(
        dict(
            algorithm='fedavg',
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
            window_location='program',
        ),
        _fedavg_family(lambda: ref.Sgd(1.0), ima_window=(2, IMA_START)),
        id='fedavg_ima_broadcast_program_window',
    ),
    # FedNova (Wang et al. 2020): here every client runs 3 steps, so FedNova's
    # update is FedAvg's (tests/algorithms/fednova_test.py has unequal
    # steps); with client momentum, WSM and an IMA window.
    pytest.param(
        dict(
            algorithm='fednova',
            client_loss='wsm',
            client_momentum=0.9,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
            server_learning_rate=0.6,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.6),
            client_loss='wsm',
            client_momentum=0.9,
            ima_window=(2, IMA_START),
            fednova=True,
        ),
        id='fednova_wsm_momentum_ima',
    ),
    # FedSAM and FedASAM clients (Caldarola et al. 2022): the gradient at
    # w + e; with FedProx + WSM + IMA, and SCAFFOLD + WSM with a window.
    pytest.param(
        dict(
            algorithm='fedavg',
            client_sharpness='sam',
            sam_rho=0.5,
            server_learning_rate=0.7,
        ),
        _fedavg_family(lambda: ref.Sgd(0.7), sharpness=('sam', 0.5, 0.0)),
        id='fedsam',
    ),
    pytest.param(
        dict(
            algorithm='fedprox',
            client_loss='wsm',
            client_sharpness='asam',
            sam_rho=0.5,
            sam_eta=0.2,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
            server_learning_rate=0.8,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.8),
            client_loss='wsm',
            proximal_strength=PROXIMAL_STRENGTH,
            sharpness=('asam', 0.5, 0.2),
            ima_window=(2, IMA_START),
        ),
        id='fedprox_wsm_asam_ima',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            client_loss='wsm',
            client_sharpness='asam',
            sam_rho=0.5,
            sam_eta=0.2,
            window_size=2,
            server_learning_rate=0.9,
        ),
        _scaffold(0.9, client_loss='wsm', sharpness=('asam', 0.5, 0.2)),
        id='scaffold_wsm_asam_window',
    ),
    # FedDyn (alpha 0.5, lr_g 0.9) with WSM clients and an IMA window.
    pytest.param(
        dict(
            algorithm='feddyn',
            feddyn_alpha=0.5,
            client_loss='wsm',
            server_learning_rate=0.9,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
            client_lr_schedule='ima',
        ),
        _client_state_family(
            family_ref.feddyn,
            0.9,
            IMA_LEARNING_RATES,
            alpha=0.5,
            client_loss='wsm',
            ima_window=(2, IMA_START),
        ),
        id='feddyn_wsm_ima',
    ),
    # AdaBest (mu 0.5, beta 0.7, lr_g 0.9) with WSM clients and a window.
    pytest.param(
        dict(
            algorithm='adabest',
            adabest_mu=0.5,
            adabest_beta=0.7,
            client_loss='wsm',
            server_learning_rate=0.9,
            window_size=2,
        ),
        _client_state_family(
            family_ref.adabest, 0.9, mu=0.5, beta=0.7, client_loss='wsm'
        ),
        id='adabest_wsm_window',
    ),
    # FedCM (alpha 0.3, lr_g 0.9) with WSM clients, a WiMA window and the
    # decaying client rate (which also scales its Delta).
    pytest.param(
        dict(
            algorithm='fedcm',
            fedcm_alpha=0.3,
            client_loss='wsm',
            server_learning_rate=0.9,
            window_size=2,
            client_lr_schedule='decay',
        ),
        _client_state_family(
            family_ref.fedcm,
            0.9,
            DECAY_LEARNING_RATES,
            alpha=0.3,
            client_loss='wsm',
        ),
        id='fedcm_wsm_window',
    ),
    # FedACG (lambda 0.8, beta 0.5) with an IMA window.
    pytest.param(
        dict(
            algorithm='fedacg',
            fedacg_lambda=0.8,
            fedacg_beta=0.5,
            server_learning_rate=1.0,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
        ),
        _client_state_family(
            family_ref.fedacg,
            1.0,
            lookahead=0.8,
            proximal_strength=0.5,
            ima_window=(2, IMA_START),
        ),
        id='fedacg_ima',
    ),
    # MIME with SGDm (beta 0.9, lr_g 0.9), WSM clients and an IMA window.
    pytest.param(
        dict(
            algorithm='mime',
            mime_beta=0.9,
            client_loss='wsm',
            server_learning_rate=0.9,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
        ),
        _client_state_family(
            family_ref.mime,
            0.9,
            beta=0.9,
            client_loss='wsm',
            ima_window=(2, IMA_START),
        ),
        id='mime_wsm_ima',
    ),
    # FedGMA (tau 0.6: with 4 clients an agreement of 1/2 stays a soft 1/2),
    # WSM clients and an IMA window.
    pytest.param(
        dict(
            algorithm='fedgma',
            fedgma_threshold=0.6,
            client_loss='wsm',
            server_learning_rate=0.9,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
            client_lr_schedule='ima',
        ),
        _client_state_family(
            family_ref.fedgma,
            0.9,
            IMA_LEARNING_RATES,
            threshold=0.6,
            client_loss='wsm',
            ima_window=(2, IMA_START),
        ),
        id='fedgma_wsm_ima',
    ),
    # FedFA with an IMA window: round 1 cross-entropy only, the anchor loss
    # from round 2, the classifier's calibration from round 3.
    pytest.param(
        dict(
            algorithm='fedfa',
            fedfa_lambda=0.5,
            fedfa_momentum=0.5,
            fedfa_calibration_start_round=3,
            server_learning_rate=0.9,
            window_size=2,
            window_mode='broadcast',
            window_start_round=IMA_START,
            client_lr_schedule='ima',
        ),
        _client_state_family(
            family_ref.fedfa,
            0.9,
            IMA_LEARNING_RATES,
            anchor_lambda=0.5,
            momentum=0.5,
            calibration_start_round=3,
            ima_window=(2, IMA_START),
        ),
        id='fedfa_ima',
    ),
    # The window on part of the model (WiMA Table 5): the evaluated model's
    # classifier, or everything but it, is the window's; the rest w^t.
    pytest.param(
        dict(
            algorithm='fedavg',
            window_size=2,
            window_part='classifier',
            server_learning_rate=0.7,
        ),
        _fedavg_family(lambda: ref.Sgd(0.7)),
        id='fedavg_window_classifier_only',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            window_size=2,
            window_sizes='1',
            window_location='program',
            window_part='features',
            server_learning_rate=0.9,
        ),
        _scaffold(0.9),
        id='scaffold_program_window_features_only',
    ),
]


# Server-side SWA (SwaRunner) read out of FedAvg: t_s = 1, c = 1 averages
# w^2 and w^3; with swa_cyclic (c = 2) only w^3, trained with the cyclic rate.
CASES += [
    pytest.param(
        dict(algorithm='fedavg', swa_start_round=1, server_learning_rate=0.7),
        _fedavg_family(lambda: ref.Sgd(0.7)),
        id='fedavg_swa',
    ),
    pytest.param(
        dict(
            algorithm='fedavgm',
            swa_start_round=1,
            swa_cycle=2,
            client_lr_schedule='swa_cyclic',
            client_lr_low=SWA_CYCLIC_LOW,
            server_learning_rate=0.5,
        ),
        _fedavg_family(
            lambda: ref.Sgd(0.5, momentum=0.9),
            client_learning_rates=SWA_CYCLIC_LEARNING_RATES,
        ),
        id='fedavgm_swa_cyclic',
    ),
]


def test_cases_cover_every_algorithm():
  algorithms = {case.values[0]['algorithm'] for case in CASES}
  assert algorithms == set(experiments.ALGORITHMS)


def _read_csv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def _swa_models(models, start_round, cycle):
  """FedSWA (the authors' main.py, round i = t - 1, S = t_s - 1): after
  rounds i > S with (i - S) % c == 0 the running mean takes w^t; w^t while
  none is averaged."""
  out, averaged = [], []
  for i in range(ROUNDS):
    if i > start_round - 1 and (i - start_round + 1) % cycle == 0:
      averaged.append(models[i + 1])
    out.append(np.mean(averaged, axis=0) if averaged else models[i + 1])
  return out


# The classifier (the MLP's last layer, W2 and b2) is the flat weights' tail
# from here (wiring_reference.unflatten's order).
CLASSIFIER_START = INPUT_DIM * HIDDEN + HIDDEN


def _window_models(models, window_size, start_round, part='all'):
  """WiMA Eq. 4: the mean of the last W models from round max(W, t_s) on.

  With `part` (WiMA Table 5) only the classifier's ('classifier') or only
  the other weights ('features') are the window's, the rest w^t's.
  """
  if not window_size:
    return models[1:]
  means = [
      np.mean(models[t - window_size + 1 : t + 1], axis=0)
      if t >= max(window_size, start_round)
      else models[t]
      for t in range(1, ROUNDS + 1)
  ]
  window_part = {
      'all': slice(None),
      'classifier': slice(CLASSIFIER_START, None),
      'features': slice(None, CLASSIFIER_START),
  }[part]
  mixed = [np.array(model) for model in models[1:]]
  for mean, model in zip(means, mixed):
    model[window_part] = mean[window_part]
  return mixed


@pytest.mark.parametrize('flags, expected_fn', CASES)
def test_run_matches_numpy_of_the_algorithm(
    flags, expected_fn, inputs, data_npz, tmp_path, tff_execution_context
):
  config = experiments.ExperimentConfig(
      **BASE_FLAGS,
      **flags,
      data_npz=data_npz,
      root_output_dir=str(tmp_path),
      experiment_name='run',
  )
  summary = session_worker.run_experiment(tff_execution_context, config)
  models, aggregates = expected_fn(inputs)  # [w^0, w^1, ..., w^ROUNDS]

  def losses(weights):
    return [
        inputs.model.cross_entropy(w, inputs.x_test, inputs.y_test)
        for w in weights
    ]

  assert summary['eval_rounds'] == list(range(1, ROUNDS + 1))
  np.testing.assert_allclose(
      summary['global']['loss']['values'], losses(models[1:]), rtol=RTOL
  )
  window = _window_models(
      models, config.window_size, config.window_start_round, config.window_part
  )
  if config.window_mode == 'broadcast':
    window = models[1:]  # The global model is the window model sent.
  if config.swa_start_round:
    window = _swa_models(models, config.swa_start_round, config.swa_cycle)
  np.testing.assert_allclose(
      summary['window']['loss']['values'], losses(window), rtol=RTOL
  )
  rows = _read_csv(os.path.join(tmp_path, 'run', 'metrics.csv'))
  has_aggregate = any(key.startswith('aggregate/') for key in rows[0])
  assert has_aggregate == (aggregates is not None)
  if aggregates is not None:
    np.testing.assert_allclose(
        [float(row['aggregate/loss']) for row in rows],
        losses(aggregates),
        rtol=RTOL,
    )
    # After the window is active, the aggregate is not the sent model.
    assert abs(losses(aggregates)[-1] - losses(models[1:])[-1]) > 1e-3
  for size in experiments.parse_window_sizes(config):
    np.testing.assert_allclose(
        [float(row[f'window_{size}/loss']) for row in rows],
        losses(
            _window_models(
                models, size, config.window_start_round, config.window_part
            )
        ),
        rtol=RTOL,
    )
  if config.client_lr_schedule != 'constant':
    np.testing.assert_allclose(
        [float(row['train/client_work/client_learning_rate']) for row in rows],
        SCHEDULE_LEARNING_RATES[config.client_lr_schedule],
        rtol=1e-6,
    )
