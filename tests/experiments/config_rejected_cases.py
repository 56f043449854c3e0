"""The configurations `validate_config` must reject, with the flags it names.

Each case breaks one field (or two) of `config_fixtures.BASE`; where a bound is
numeric the case is the first value past it. Used by config_test.py.
"""

import pytest


def _fails(name, flags, **overrides):
  return pytest.param(overrides, flags, id=name)


BAD_CONFIGS = [
    _fails('unknown_task', ['--task'], task='cifar10', data_npz=None),
    _fails('unknown_algorithm', ['--algorithm'], algorithm='fedsgd'),
    _fails('unknown_client_loss', ['--client_loss'], client_loss='focal'),
    _fails(
        'unknown_client_states',
        ['--client_states', 'memory', 'disk'],
        client_states='ram',
    ),
    _fails(
        'client_states_without_scaffold',
        ['--client_states', '--algorithm=fedavg'],
        client_states='disk',
    ),
    _fails(
        'client_states_dir_without_scaffold',
        ['--client_states_dir', '--algorithm=fedavg'],
        client_states_dir='/tmp/states',
    ),
    _fails(
        'unknown_client_state_transfer',
        ['--client_state_transfer', 'auto', 'values', 'files'],
        algorithm='scaffold',
        client_state_transfer='disk',
    ),
    _fails(
        'unknown_server_state_transfer',
        ['--server_state_transfer', 'auto', 'values', 'files'],
        server_state_transfer='disk',
    ),
    _fails(
        'unknown_client_data_transfer',
        ['--client_data_transfer', 'auto', 'values', 'files'],
        client_data_transfer='bundle',
    ),
    _fails(
        'client_state_transfer_without_scaffold',
        ['--client_state_transfer', '--algorithm=fedavg'],
        client_state_transfer='files',
    ),
    _fails(
        'unknown_window_mode',
        ['--window_mode'],
        window_size=2,
        window_mode='average',
    ),
    _fails(
        'unknown_lr_schedule',
        ['--client_lr_schedule'],
        client_lr_schedule='cosine',
    ),
    _fails(
        'window_start_after_last_round',
        ['--window_start_round', '--total_rounds'],
        window_size=2,
        window_start_round=11,
    ),
    _fails(
        'more_clients_per_round_than_clients',
        ['--clients_per_round', '--num_clients'],
        clients_per_round=11,
    ),
    _fails(
        'client_lr_zero', ['--client_learning_rate'], client_learning_rate=0.0
    ),
    _fails(
        'client_lr_negative',
        ['--client_learning_rate'],
        client_learning_rate=-0.1,
    ),
    _fails(
        'client_lr_nan',
        ['--client_learning_rate'],
        client_learning_rate=float('nan'),
    ),
    _fails(
        'server_lr_zero', ['--server_learning_rate'], server_learning_rate=0.0
    ),
    _fails(
        'server_lr_negative',
        ['--server_learning_rate'],
        server_learning_rate=-1.0,
    ),
    _fails(
        'window_mode_without_window_size',
        ['--window_mode', '--window_size'],
        window_mode='broadcast',
    ),
    _fails(
        'window_start_round_without_window_size',
        ['--window_start_round', '--window_size'],
        window_start_round=3,
    ),
    _fails(
        'window_read_every_without_window_size',
        ['--window_read_every', '--window_size'],
        window_read_every=2,
    ),
    _fails(
        'eval_rounds_not_multiple_of_read_every',
        ['--rounds_per_eval', '--window_read_every'],
        window_size=4,
        window_read_every=2,
        rounds_per_eval=3,
    ),
    _fails(
        'total_rounds_not_multiple_of_read_every',
        ['--total_rounds', '--window_read_every'],
        window_size=4,
        window_read_every=3,
        rounds_per_eval=3,
    ),
    _fails(
        'broadcast_reads_every_second_round',
        ['--window_read_every'],
        window_size=4,
        window_mode='broadcast',
        window_read_every=2,
    ),
    _fails(
        'wsm_on_shakespeare',
        ['--client_loss', '--task'],
        task='shakespeare',
        data_npz=None,
        client_loss='wsm',
    ),
    _fails(
        'wsm_on_stackoverflow',
        ['--client_loss', '--task'],
        task='stackoverflow',
        data_npz=None,
        client_loss='wsm',
    ),
    _fails(
        'ima_with_mime_lite',
        ['--client_lr_schedule', '--algorithm'],
        algorithm='mime_lite',
        client_lr_schedule='ima',
    ),
    _fails(
        'client_lr_low_with_ima',
        ['--client_lr_low', '--client_lr_schedule=ima_constant'],
        client_lr_schedule='ima',
        client_lr_low=1e-4,
    ),
    _fails(
        'client_lr_cycle_with_ima_constant',
        ['--client_lr_cycle', '--client_lr_schedule=ima_cyclic'],
        client_lr_schedule='ima_constant',
        client_lr_cycle=10,
    ),
    _fails(
        'client_lr_low_not_below_the_rate',
        ['--client_lr_low', '--client_learning_rate', 'ima_cyclic'],
        client_lr_schedule='ima_cyclic',
        client_learning_rate=0.01,
        client_lr_low=0.01,
    ),
    _fails('client_lr_low_zero', ['--client_lr_low'], client_lr_low=0.0),
    _fails('client_lr_cycle_one', ['--client_lr_cycle'], client_lr_cycle=1),
    # IMA's epoch decay needs epochs to take away.
    _fails(
        'client_epochs_decay_every_with_one_epoch',
        ['--client_epochs_decay_every', '--client_epochs >= 2'],
        client_epochs=1,
        client_epochs_decay_every=20,
    ),
    _fails(
        'client_epochs_decay_every_negative',
        ['--client_epochs_decay_every'],
        client_epochs=2,
        client_epochs_decay_every=-1,
    ),
    # Server-side SWA (BASE: 10 rounds).
    _fails(
        'swa_start_round_negative',
        ['--swa_start_round'],
        swa_start_round=-1,
    ),
    _fails('swa_cycle_zero', ['--swa_cycle'], swa_start_round=2, swa_cycle=0),
    _fails(
        'swa_cycle_without_swa',
        ['--swa_cycle', '--swa_start_round'],
        swa_cycle=2,
    ),
    _fails(
        'swa_with_a_window',
        ['--swa_start_round', '--window_size'],
        swa_start_round=2,
        window_size=2,
    ),
    _fails(
        'swa_averaging_nothing',
        ['--swa_start_round', '--swa_cycle', '--total_rounds'],
        swa_start_round=8,
        swa_cycle=3,
    ),
    _fails(
        'swa_cyclic_without_swa',
        ['--client_lr_schedule=swa_cyclic', '--swa_start_round'],
        client_lr_schedule='swa_cyclic',
    ),
    _fails(
        'swa_cyclic_with_cycle_one',
        ['--client_lr_schedule=swa_cyclic', '--swa_cycle >= 2'],
        client_lr_schedule='swa_cyclic',
        swa_start_round=2,
    ),
    _fails(
        'swa_cyclic_with_mime_lite',
        ['--client_lr_schedule', '--algorithm'],
        algorithm='mime_lite',
        client_lr_schedule='swa_cyclic',
        swa_start_round=2,
        swa_cycle=2,
    ),
    _fails(
        'client_lr_cycle_with_swa_cyclic',
        ['--client_lr_cycle', '--client_lr_schedule=ima_cyclic'],
        client_lr_schedule='swa_cyclic',
        swa_start_round=2,
        swa_cycle=2,
        client_lr_cycle=10,
    ),
    _fails(
        'mime_lite_with_wsm',
        ['--algorithm', '--client_loss'],
        algorithm='mime_lite',
        client_loss='wsm',
    ),
    _fails(
        'mime_lite_window_needs_server_lr_1',
        ['--server_learning_rate'],
        algorithm='mime_lite',
        window_size=2,
        server_learning_rate=0.99,
    ),
    _fails('npz_without_data_npz', ['--data_npz'], data_npz=None),
    _fails('npz_with_empty_data_npz', ['--data_npz'], data_npz=''),
    _fails('data_npz_with_mnist', ['--data_npz'], task='mnist'),
    _fails(
        'leaf_without_data_dir',
        ['--data_dir', '--task=leaf'],
        task='leaf',
        data_npz=None,
    ),
    _fails('data_dir_with_npz', ['--data_dir', '--task=leaf'], data_dir='/d'),
    _fails(
        'text_without_data_jsonl',
        ['--data_jsonl', '--task=text'],
        task='text',
        data_npz=None,
    ),
    _fails(
        'data_jsonl_not_jsonl_or_csv',
        ['--data_jsonl', '.jsonl or .csv', 'a.txt'],
        task='text',
        data_npz=None,
        data_jsonl='a.txt',
    ),
    _fails(
        'leaf_kind_with_npz',
        ['--leaf_kind', '--task=leaf'],
        leaf_kind='femnist',
    ),
    _fails('unknown_leaf_kind', ['--leaf_kind'], leaf_kind='reddit'),
    _fails(
        'leaf_images_dir_with_npz',
        ['--leaf_images_dir', '--task=leaf'],
        leaf_images_dir='img',
    ),
    _fails(
        'leaf_vocab_file_with_npz',
        ['--leaf_vocab_file', '--task=leaf'],
        leaf_vocab_file='embs.json',
    ),
    _fails(
        'vocab_size_with_npz',
        ['--vocab_size', '--task=text', '--task=leaf'],
        vocab_size=500,
    ),
    _fails(
        'vocab_size_with_leaf_vocab_file',
        ['--vocab_size', '--leaf_vocab_file'],
        task='leaf',
        data_npz=None,
        data_dir='leaf',
        vocab_size=500,
        leaf_vocab_file='embs.json',
    ),
    _fails(
        'text_level_with_npz',
        ['--text_level', '--task=text'],
        text_level='char',
    ),
    _fails('unknown_text_level', ['--text_level'], text_level='byte'),
    _fails(
        'text_model_with_npz',
        ['--text_model', '--task=text'],
        text_model='small',
    ),
    _fails(
        'unknown_text_model', ['--text_model', 'tff', 'small'], text_model='big'
    ),
    _fails(
        'server_epsilon_with_fedavg',
        ['--server_epsilon', 'fedadam or fedyogi', '--algorithm=fedavg'],
        server_epsilon=1e-5,
    ),
    _fails(
        'server_epsilon_zero',
        ['--server_epsilon', '> 0'],
        algorithm='fedadam',
        server_epsilon=0.0,
    ),
    _fails(
        'text_tokenizer_with_npz',
        ['--text_tokenizer', '--task=text'],
        text_tokenizer='whitespace',
    ),
    _fails(
        'unknown_text_tokenizer',
        ['--text_tokenizer', 'words', 'whitespace'],
        text_tokenizer='nltk',
    ),
    _fails(
        'max_npz_bytes_negative', ['--max_npz_bytes', '>= 0'], max_npz_bytes=-1
    ),
    _fails(
        'max_npz_bytes_with_mnist',
        ['--max_npz_bytes', '--task=npz'],
        task='mnist',
        data_npz=None,
        max_npz_bytes=2**20,
    ),
    _fails(
        'stackoverflow_test_batches_with_npz',
        ['--stackoverflow_test_batches', '--task=stackoverflow'],
        stackoverflow_test_batches=5,
    ),
    _fails(
        'stackoverflow_test_batches_negative',
        ['--stackoverflow_test_batches', '>= 0'],
        task='stackoverflow',
        data_npz=None,
        stackoverflow_test_batches=-1,
    ),
    _fails(
        'client_shuffle_buffer_zero',
        ['--client_shuffle_buffer', '>= 1'],
        client_shuffle_buffer=0,
    ),
    _fails(
        'model_with_emnist',
        ['--model', '--task=emnist'],
        task='emnist',
        data_npz=None,
        model='cnn',
    ),
    _fails('unknown_model', ['--model'], model='vgg11'),
    *[
        _fails(
            f'text_{flag}_{value}',
            [f'--{flag}'],
            task='text',
            data_npz=None,
            data_jsonl='own.jsonl',
            **{flag: value},
        )
        for flag, value in (
            ('vocab_size', 0),
            ('sequence_length', 0),
            ('test_fraction', 1.0),
            ('test_fraction', -0.1),
        )
    ],
    _fails(
        'vocab_size_with_char_level',
        ['--vocab_size', '--text_level=word'],
        task='text',
        data_npz=None,
        data_jsonl='own.csv',
        text_level='char',
        vocab_size=500,
    ),
    _fails(
        'text_tokenizer_with_char_level',
        ['--text_tokenizer', '--text_level=word'],
        task='text',
        data_npz=None,
        data_jsonl='own.csv',
        text_level='char',
        text_tokenizer='whitespace',
    ),
    _fails('unknown_eval_split', ['--eval_split'], eval_split='train'),
    _fails(
        'validation_split_without_mnist',
        ['--eval_split=validation', '--task=npz'],
        eval_split='validation',
    ),
    _fails(
        'eval_per_client_without_test_clients',
        [
            '--eval_per_client',
            '--task=leaf or --task=text or --task=shakespeare or --task=emnist '
            'or --task=stackoverflow',
            '--task=npz',
        ],
        eval_per_client=True,
    ),
    _fails('total_rounds_zero', ['--total_rounds'], total_rounds=0),
    _fails('total_rounds_not_int', ['--total_rounds'], total_rounds=2.5),
    _fails('total_rounds_bool', ['--total_rounds'], total_rounds=True),
    _fails(
        'clients_per_round_zero', ['--clients_per_round'], clients_per_round=0
    ),
    _fails('client_epochs_zero', ['--client_epochs'], client_epochs=0),
    _fails(
        'client_batch_size_zero', ['--client_batch_size'], client_batch_size=0
    ),
    _fails(
        'client_max_elements_negative',
        ['--client_max_elements'],
        client_max_elements=-1,
    ),
    _fails('rounds_per_eval_zero', ['--rounds_per_eval'], rounds_per_eval=0),
    _fails(
        'rounds_per_checkpoint_zero',
        ['--rounds_per_checkpoint'],
        rounds_per_checkpoint=0,
    ),
    _fails(
        'num_clients_zero',
        ['--num_clients'],
        num_clients=0,
        clients_per_round=1,
    ),
    _fails('summary_last_n_zero', ['--summary_last_n'], summary_last_n=0),
    _fails(
        'window_read_every_zero',
        ['--window_read_every'],
        window_size=2,
        window_read_every=0,
    ),
    _fails('window_size_negative', ['--window_size'], window_size=-1),
    _fails(
        'window_start_round_negative',
        ['--window_start_round'],
        window_size=2,
        window_start_round=-1,
    ),
    _fails('seed_negative', ['--seed'], seed=-1),
    _fails(
        'dirichlet_alpha_negative',
        ['--dirichlet_alpha'],
        dirichlet_alpha=-1e-9,
    ),
    _fails(
        'proximal_strength_negative',
        ['--proximal_strength'],
        algorithm='fedprox',
        proximal_strength=-1e-9,
    ),
    _fails('workers_zero', ['--workers'], workers='0'),
    _fails('workers_word', ['--workers'], workers='many'),
    _fails('workers_negative', ['--workers'], workers='-2'),
    _fails('workers_no_port', ['--workers'], workers='localhost:'),
    _fails('workers_no_host', ['--workers'], workers=':8000'),
    _fails('workers_port_not_number', ['--workers'], workers='localhost:http'),
    _fails(
        'workers_empty_entry',
        ['--workers'],
        workers='localhost:8000,,localhost:8001',
    ),
    _fails('workers_port_above_65535', ['--workers'], workers='host:65536'),
    _fails('workers_port_zero', ['--workers'], workers='host:0'),
    _fails('workers_host_with_space', ['--workers'], workers='my host:8000'),
    _fails('unknown_worker_bind', ['--worker_bind'], worker_bind='public'),
    _fails(
        'worker_bind_all_with_running_workers',
        ['--worker_bind'],
        worker_bind='all',
        workers='localhost:8000',
    ),
    _fails(
        'window_larger_than_total_rounds',
        ['--window_size', '--total_rounds'],
        window_size=11,
    ),
    _fails(
        'window_read_every_with_scaffold',
        ['--window_read_every', '--algorithm'],
        algorithm='scaffold',
        window_size=4,
        window_read_every=2,
        rounds_per_eval=2,
    ),
    _fails(
        'unknown_window_location',
        ['--window_location', 'auto', 'state', 'program'],
        window_size=2,
        window_location='driver',
    ),
    _fails(
        'window_location_without_window_size',
        ['--window_location', '--window_size'],
        window_location='program',
    ),
    _fails(
        'window_sizes_without_window_size',
        ['--window_sizes', '--window_size'],
        window_sizes='2,3',
    ),
    _fails(
        'client_sharpness_without_rho',
        ['--client_sharpness=asam needs --sam_rho > 0', 'got 0.0'],
        client_sharpness='asam',
    ),
    _fails(
        'client_sharpness_with_mime_lite',
        ['--client_sharpness is supported with --algorithm=', "'mime_lite'"],
        algorithm='mime_lite',
        client_sharpness='sam',
        sam_rho=0.1,
    ),
    _fails(
        'sam_rho_without_client_sharpness',
        ['--sam_rho and --sam_eta need --client_sharpness'],
        sam_rho=0.1,
    ),
    _fails(
        'sam_eta_with_sam',
        ['--sam_eta is read by --client_sharpness=asam only'],
        client_sharpness='sam',
        sam_rho=0.1,
        sam_eta=0.2,
    ),
    _fails(
        'sam_rho_negative',
        ['--sam_rho'],
        client_sharpness='sam',
        sam_rho=-0.1,
    ),
    _fails(
        'client_sharpness_unknown',
        ['--client_sharpness', 'none, sam, asam'],
        client_sharpness='adam',
        sam_rho=0.1,
    ),
    _fails(
        'feddyn_without_alpha',
        ['--algorithm=feddyn needs --feddyn_alpha > 0', 'it is not set'],
        algorithm='feddyn',
    ),
    _fails(
        'feddyn_alpha_with_fedavg',
        ['--feddyn_alpha is for --algorithm=feddyn', '--algorithm=fedavg'],
        feddyn_alpha=0.1,
    ),
    _fails(
        'feddyn_alpha_negative',
        ['--feddyn_alpha'],
        algorithm='feddyn',
        feddyn_alpha=-0.1,
    ),
    _fails(
        'adabest_without_beta',
        ['--algorithm=adabest needs --adabest_beta in [0, 1)', 'not set'],
        algorithm='adabest',
        adabest_mu=0.01,
    ),
    _fails(
        'fedcm_alpha_above_one',
        ['--fedcm_alpha must be in (0, 1]', 'got 1.5'],
        algorithm='fedcm',
        fedcm_alpha=1.5,
    ),
    _fails(
        'fedacg_without_beta',
        ['--algorithm=fedacg needs --fedacg_beta >= 0', 'not set'],
        algorithm='fedacg',
        fedacg_lambda=0.85,
    ),
    _fails(
        'fedacg_lambda_one',
        ['--fedacg_lambda must be in [0, 1)', 'got 1.0'],
        algorithm='fedacg',
        fedacg_lambda=1.0,
        fedacg_beta=0.01,
    ),
    _fails(
        'fedacg_client_states_flag',
        ['--client_states', '--algorithm=fedacg keeps none'],
        algorithm='fedacg',
        fedacg_lambda=0.85,
        fedacg_beta=0.01,
        client_states='disk',
    ),
    _fails(
        'mime_beta_one',
        ['--mime_beta must be in [0, 1)', 'got 1.0'],
        algorithm='mime',
        mime_beta=1.0,
    ),
    _fails(
        'fedgma_threshold_above_one',
        ['--fedgma_threshold must be in [0, 1]', 'got 1.2'],
        algorithm='fedgma',
        fedgma_threshold=1.2,
    ),
    _fails(
        'fedgma_without_threshold',
        ['--algorithm=fedgma needs --fedgma_threshold in [0, 1]', 'uses 0.8'],
        algorithm='fedgma',
    ),
    _fails(
        'fedgma_threshold_with_fedavg',
        [
            '--fedgma_threshold is for --algorithm=fedgma',
            'got --algorithm=fedavg',
        ],
        fedgma_threshold=0.8,
    ),
    _fails(
        'mime_without_beta',
        ['--algorithm=mime needs --mime_beta in [0, 1)', '0.9 (MIME SGDm)'],
        algorithm='mime',
    ),
    _fails(
        'mime_client_sharpness',
        ['--client_sharpness is supported with', "'mime'", 'at x'],
        algorithm='mime',
        mime_beta=0.9,
        client_sharpness='sam',
        sam_rho=0.05,
    ),
    _fails(
        'feddyn_client_momentum',
        ['--client_momentum is supported with', "'feddyn'"],
        algorithm='feddyn',
        feddyn_alpha=0.1,
        client_momentum=0.9,
    ),
    _fails(
        'window_part_without_window_size',
        ['--window_part', '--window_size >= 1'],
        window_part='classifier',
    ),
    _fails(
        'window_part_with_broadcast',
        ['--window_part=features needs --window_mode=evaluate', 'IMA'],
        window_size=2,
        window_mode='broadcast',
        window_part='features',
    ),
    _fails(
        'window_part_unknown',
        ['--window_part', 'classifier'],
        window_size=2,
        window_part='head',
    ),
    _fails(
        'window_sizes_not_integers',
        ['--window_sizes', 'comma list of distinct integers 1-10'],
        window_size=2,
        window_sizes='3,x',
    ),
    _fails(
        'window_sizes_repeating_window_size',
        ['--window_sizes', 'other than --window_size (2)', "'3,2'"],
        window_size=2,
        window_sizes='3,2',
    ),
    _fails(
        'window_sizes_superscript_digit',
        ['--window_sizes'],
        window_size=2,
        window_sizes='\u00b2',
    ),
    _fails(
        'window_sizes_repeated',
        ['--window_sizes'],
        window_size=2,
        window_sizes='3,3',
    ),
    _fails(
        'window_sizes_zero', ['--window_sizes'], window_size=2, window_sizes='0'
    ),
    _fails(
        'window_sizes_past_total_rounds',
        ['--window_sizes', '--total_rounds'],
        window_size=2,
        window_sizes='11',
    ),
    _fails(
        'window_sizes_in_the_state_above_window_size',
        ['--window_sizes', '< --window_size (2)', 'got 5'],
        window_size=2,
        window_sizes='5',
        window_location='state',
    ),
    _fails(
        'window_sizes_in_the_state_off_the_segments',
        ['--window_sizes', 'multiple of --window_read_every (2)', '2, 4;'],
        window_size=6,
        window_read_every=2,
        rounds_per_eval=2,
        window_sizes='2,3',
        window_location='state',
    ),
    _fails(
        'window_sizes_in_the_state_one_segment',
        ['--window_sizes', 'none with these flags', 'got 1'],
        window_size=2,
        window_read_every=2,
        rounds_per_eval=2,
        window_sizes='1',
        window_location='state',
    ),
    _fails(
        'client_momentum_one',
        ['--client_momentum', '[0, 1)', '1.0'],
        client_momentum=1.0,
    ),
    _fails(
        'client_momentum_negative',
        ['--client_momentum', '[0, 1)'],
        client_momentum=-0.1,
    ),
    _fails(
        'client_momentum_with_scaffold',
        ['--client_momentum', "'scaffold'"],
        algorithm='scaffold',
        client_momentum=0.9,
    ),
    _fails(
        'experiment_name_with_slash',
        ['--experiment_name'],
        experiment_name='runs/a',
    ),
    _fails(
        'experiment_name_parent', ['--experiment_name'], experiment_name='..'
    ),
    _fails('experiment_name_empty', ['--experiment_name'], experiment_name=''),
    # Files with running workers (maybe on other hosts) need a shared mount.
    _fails(
        'files_with_remote_workers_without_shared_dir',
        [
            '--server_state_transfer=files',
            '--workers=host:8000',
            '--shared_dir=DIR',
            'values',
        ],
        workers='host:8000',
        server_state_transfer='files',
    ),
    _fails(
        'scaffold_files_with_remote_workers_without_shared_dir',
        [
            '--client_state_transfer=files, --client_data_transfer=files',
            '--shared_dir',
        ],
        algorithm='scaffold',
        workers='10.0.0.2:8000,10.0.0.3:8000',
        client_state_transfer='files',
        client_data_transfer='files',
    ),
    _fails(
        'shared_dir_with_all_values',
        ['--shared_dir', 'none of them files'],
        shared_dir='/mnt/shared',
        server_state_transfer='values',
        client_data_transfer='values',
    ),
    _fails('shared_dir_empty', ['--shared_dir', "got ''"], shared_dir=''),
]
