"""The configurations `validate_config` must accept: the edges of each field.

Each case changes fields of `config_fixtures.BASE`. Used by config_test.py.
"""

import pytest

GOOD_CONFIGS = [
    # Also the edges window_size=0 (no window) and seed=0 (BASE's defaults).
    pytest.param({}, id='base'),
    pytest.param(dict(total_rounds=1), id='total_rounds_one'),
    # The edge: two epochs, one fewer after the first round of decay.
    pytest.param(
        dict(client_epochs=2, client_epochs_decay_every=1),
        id='epoch_decay_from_two_epochs',
    ),
    pytest.param(dict(server_learning_rate=1e-9), id='tiny_server_lr'),
    pytest.param(
        dict(algorithm='fedprox', proximal_strength=0.0),
        id='proximal_strength_zero',
    ),
    pytest.param(
        dict(algorithm='mime_lite', window_size=2, server_learning_rate=1.0),
        id='mime_lite_window_server_lr_1',
    ),
    pytest.param(
        dict(window_size=4, window_read_every=2, rounds_per_eval=4),
        id='read_every_divides_rounds_per_eval',
    ),
    pytest.param(dict(workers='1'), id='one_local_worker'),
    pytest.param(dict(workers='host:65535'), id='highest_port'),
    pytest.param(
        dict(
            algorithm='scaffold',
            client_states='disk',
            client_states_dir='/tmp/states',
        ),
        id='scaffold_disk_client_states',
    ),
    pytest.param(dict(task='mnist', data_npz=None), id='defaults_on_mnist'),
    pytest.param(
        dict(task='mnist', data_npz=None, eval_split='validation'),
        id='mnist_validation_split',
    ),
    pytest.param(
        dict(task='leaf', data_npz=None, data_dir='leaf', eval_per_client=True),
        id='leaf_per_client_evaluation',
    ),
    pytest.param(
        dict(window_size=2, window_start_round=10),
        id='window_start_at_last_round',
    ),
    pytest.param(
        dict(window_size=4, window_read_every=2, rounds_per_eval=2),
        id='window_read_every_2',
    ),
    pytest.param(
        dict(
            window_size=6,
            window_read_every=2,
            rounds_per_eval=2,
            window_sizes='2,4',
            window_location='state',
        ),
        id='window_sizes_in_the_state',
    ),
    pytest.param(
        dict(
            window_size=3,
            window_mode='broadcast',
            window_start_round=5,
            client_lr_schedule='ima',
        ),
        id='ima_broadcast',
    ),
    pytest.param(dict(swa_start_round=9), id='swa_last_round'),
    pytest.param(
        dict(
            swa_start_round=4,
            swa_cycle=3,
            client_lr_schedule='swa_cyclic',
            client_lr_low=1e-4,
        ),
        id='swa_cyclic',
    ),
    pytest.param(
        dict(algorithm='scaffold', swa_start_round=2, swa_cycle=2),
        id='scaffold_swa',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            client_loss='wsm',
            window_size=2,
            window_mode='broadcast',
        ),
        id='scaffold_wsm_broadcast',
    ),
    pytest.param(dict(algorithm='fedprox', window_size=2), id='fedprox_window'),
    # The window kept by the program holds post-optimizer models every round
    # for any algorithm: SCAFFOLD reads it every E rounds, Mime Lite with any
    # server learning rate.
    pytest.param(
        dict(
            algorithm='scaffold',
            window_size=4,
            window_read_every=2,
            rounds_per_eval=2,
            window_location='program',
        ),
        id='scaffold_program_window_read_every_2',
    ),
    pytest.param(
        dict(
            algorithm='mime_lite',
            window_size=2,
            window_location='program',
            server_learning_rate=0.5,
        ),
        id='mime_lite_program_window_server_lr',
    ),
    # FedProx runs build_fed_win: the window after any server optimizer, and
    # IMA's client learning-rate schedule.
    pytest.param(
        dict(algorithm='fedprox', window_size=2, server_learning_rate=0.5),
        id='fedprox_window_server_lr',
    ),
    pytest.param(
        dict(algorithm='fedprox', client_lr_schedule='ima', window_size=2),
        id='fedprox_ima',
    ),
    # The client-state family's SGD clients take the schedules too.
    pytest.param(
        dict(
            algorithm='scaffold',
            client_lr_schedule='ima',
            window_size=2,
            window_mode='broadcast',
        ),
        id='scaffold_ima',
    ),
    pytest.param(
        dict(
            algorithm='fedprox',
            client_loss='wsm',
            window_size=2,
            server_learning_rate=0.5,
        ),
        id='fedprox_wsm_window_server_lr',
    ),
    pytest.param(
        dict(algorithm='fedadam', server_learning_rate=0.01), id='fedadam'
    ),
    pytest.param(
        dict(
            task='emnist',
            data_npz=None,
            client_loss='wsm',
            use_synthetic_data=True,
        ),
        id='wsm_on_emnist',
    ),
    pytest.param(dict(task='shakespeare', data_npz=None), id='shakespeare'),
    pytest.param(
        dict(task='leaf', data_npz=None, data_dir='/leaf', model='leaf_cnn'),
        id='leaf_with_a_model',
    ),
    pytest.param(
        dict(
            task='leaf', data_npz=None, data_dir='/l', leaf_kind='shakespeare'
        ),
        id='leaf_kind_named',
    ),
    pytest.param(
        dict(
            task='text',
            data_npz=None,
            data_jsonl='own.JSONL',
            vocab_size=1,
            sequence_length=1,
            test_fraction=0.0,
        ),
        id='text_lowest_bounds',
    ),
    pytest.param(
        dict(task='text', data_npz=None, data_jsonl='o.csv', text_level='char'),
        id='text_csv_char_level',
    ),
    pytest.param(dict(model='resnet20_gn'), id='npz_with_a_model'),
    pytest.param(dict(clients_per_round=10), id='all_clients_per_round'),
    pytest.param(dict(dirichlet_alpha=0.0), id='one_class_per_client'),
    pytest.param(dict(dirichlet_alpha=float('inf')), id='equal_proportions'),
    pytest.param(dict(workers='2'), id='two_local_workers'),
    pytest.param(
        dict(workers='localhost:8000, 127.0.0.1:8001'), id='remote_workers'
    ),
    pytest.param(
        dict(window_size=5, window_sizes=' 1, 10,3'),
        id='several_windows_on_one_trajectory',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            window_size=2,
            window_mode='broadcast',
            window_sizes='4,6',
            window_location='program',
        ),
        id='scaffold_ima_with_extra_windows',
    ),
    # --window_sizes puts the window in the program under auto: SCAFFOLD
    # reads it every E rounds, Mime Lite with any server learning rate.
    pytest.param(
        dict(
            algorithm='scaffold',
            window_size=4,
            window_read_every=2,
            rounds_per_eval=2,
            window_sizes='2',
        ),
        id='scaffold_read_every_2_with_extra_windows',
    ),
    pytest.param(
        dict(
            algorithm='mime_lite',
            window_size=2,
            window_sizes='3',
            server_learning_rate=0.5,
        ),
        id='mime_lite_server_lr_with_extra_windows',
    ),
    pytest.param(dict(window_size=10), id='window_as_long_as_the_run'),
    pytest.param(dict(worker_bind='all'), id='worker_bind_all'),
    pytest.param(
        dict(workers='2', worker_bind='all'),
        id='two_local_workers_on_all_interfaces',
    ),
    pytest.param(
        dict(workers='host:8000', shared_dir='/mnt/shared'),
        id='remote_workers_auto_with_shared_dir',
    ),
    pytest.param(
        dict(
            algorithm='scaffold',
            workers='host:8000',
            shared_dir='/mnt/shared',
            client_state_transfer='files',
            server_state_transfer='values',
            client_data_transfer='values',
        ),
        id='remote_workers_one_files_mode_with_shared_dir',
    ),
    pytest.param(
        dict(workers='host:8000', client_data_transfer='values'),
        id='remote_workers_values_without_shared_dir',
    ),
]
