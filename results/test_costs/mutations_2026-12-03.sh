#!/usr/bin/env bash
# Applies one known defect at a time to a copy of main and runs the tests that should catch it
# (results/test_costs/mutation_lib.sh: a defect whose text does not occur once is NOT APPLIED).
source "$(dirname "$0")/mutation_lib.sh"
apply server_opt tff_fedwin/algorithms/fed_win.py "build_sgdm(learning_rate=1.0)" "build_sgdm(learning_rate=0.5)" tests/algorithms/fed_win_test.py tests/algorithms/multi_round_test.py
apply window_off_by_one tff_fedwin/aggregators/window_math.py "      t >= tf.maximum(window.window_size, window.start_round)," "      t > tf.maximum(window.window_size, window.start_round)," tests/aggregators/window_math_test.py tests/aggregators/window_factory_test.py
apply no_lock tff_fedwin/training/run_lock.py "      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)" "      pass" tests/training/run_lock_test.py
apply crc_ignored tff_fedwin/training/checkpoint_manifest.py "    if file_checksum(path)[1] != crc:" "    if False and file_checksum(path)[1] != crc:" tests/training/checkpoint_manifest_test.py tests/training/checkpoints_test.py
apply manifest_round_ignored tff_fedwin/training/checkpoint_manifest.py "    if manifest.get('round_num') != round_num:" "    if False:" tests/training/checkpoint_manifest_test.py tests/training/checkpoints_test.py
# (2026-12-07: no_csv_rollback retired: metrics.csv is no longer rolled back but restored from
# the version's copy of its rows, 23caad6; mutations_2026-12-04_checkpoints.sh's
# rows_never_restored is that path's defect.)
apply every_load_error_is_damage tff_fedwin/training/checkpoints.py "      if not load_damage.is_damage(e):" "      if False:" tests/training/checkpoints_test.py
apply malformed_manifest_accepted tff_fedwin/training/checkpoint_manifest.py "    malformed = _malformed(manifest)" "    malformed = None" tests/training/checkpoint_manifest_test.py tests/training/checkpoints_test.py
apply shared_dir_write_unchecked tff_fedwin/runtime/shared_dir.py "      _check_write(address, run, directory, flags)" "      pass" tests/runtime/shared_dir_test.py
apply unseeded_program_source tff_fedwin/training/seeded_data_source.py "        self._client_ids, k, self._seed, self._selections_made" "        self._client_ids, k, self._seed + __import__('random').randrange(9), self._selections_made" tests/training/seeded_data_source_test.py tests/runtime/program_train_model_test.py
apply resume_round_unchecked tff_fedwin/training/metrics_rows.py "  if problem and not has_copy(manifest, round_num):" "  if False:" tests/training/metrics_rows_test.py
apply no_fsync_before_manifest tff_fedwin/training/checkpoint_manifest.py "  directories = {top}" "  directories = set(); paths = []" tests/training/checkpoint_manifest_test.py
# Stop 59's defects.
apply stateful_dropout tff_fedwin/tasks/stateless_dropout.py "    return tf.nn.experimental.stateless_dropout(" "    return tf.nn.dropout(inputs, rate=self.rate, seed=self.seed) if True else tf.nn.experimental.stateless_dropout(" tests/tasks/stateless_dropout_test.py
apply dropout_rule_unchecked tff_fedwin/experiments/run_record.py "        uses_dropout," "        lambda config: False," tests/experiments/run_record_test.py
apply user_errors_not_one_line scripts/run_experiment.py "  return isinstance(error, errors.UserError)" "  return isinstance(error, errors.InputError)" tests/scripts/run_experiment_cli_test.py
apply stat_key_without_ctime tff_fedwin/data/leaf_cache.py "          + [stat.st_ctime_ns, stat.st_ino, stat.st_dev]" "          + []" tests/data/leaf_cache_test.py
apply parallel_merge_out_of_order tff_fedwin/data/leaf_convert.py "      futures = [pool.submit(_convert_file, *task) for task in tasks]" "      futures = [pool.submit(_convert_file, *task) for task in tasks[::-1]][::-1]; futures = futures[1:] + futures[:1]" tests/data/leaf_cache_test.py
apply shuffle_buffer_ignored tff_fedwin/tasks/task.py "  buffer = DEFAULT_SHUFFLE_BUFFER if shuffle_buffer is None else shuffle_buffer" "  buffer = DEFAULT_SHUFFLE_BUFFER" tests/tasks/task_test.py
# Stop 60's defects.
apply tokenizer_plain_split tff_fedwin/data/text_vocab.py "  return _WORDS.findall(text.lower())" "  return text.split()" tests/data/text_vocab_test.py
apply tokenizer_keeps_case tff_fedwin/data/text_vocab.py "  return _WORDS.findall(text.lower())" "  return _WORDS.findall(text)" tests/data/text_vocab_test.py
apply next_word_client_rate_image tff_fedwin/experiments/task_defaults.py "    NEXT_WORD: (10**-0.5," "    NEXT_WORD: (0.05," tests/experiments/task_defaults_test.py
apply absent_tokenizer_is_default tff_fedwin/experiments/run_record.py "        field.name, ABSENT_MEANS.get(field.name, _as_json(field.default))" "        field.name, _as_json(field.default)" tests/experiments/run_record_test.py
apply epsilon_not_passed tff_fedwin/experiments/algorithm_parts.py "      lr, **({} if epsilon is None else dict(epsilon=epsilon))" "      lr" tests/experiments/registry_test.py
apply record_without_task_defaults tff_fedwin/experiments/run.py "  config = task_defaults.with_defaults_of_task(config, task)" "  pass" tests/experiments/run_test.py -k records_the_learning_rates
apply synthetic_read_as_femnist tff_fedwin/data/leaf_kinds.py "  return 'femnist' if image else 'synthetic'" "  return 'femnist'" tests/data/leaf_errors_test.py tests/data/leaf_kinds_test.py
# Stop 61's defects (run alone: bash <(sed -n '1,/^apply server_opt/{/^apply server_opt/!p}; /^# Stop 61/,$p' this file)).
apply per_client_rows_not_cut tff_fedwin/training/per_client_csv.py "    os.truncate(path, listed[0])" "    pass" tests/training/per_client_loop_test.py
apply per_client_prefix_unchecked tff_fedwin/training/per_client_csv.py "  if actual != crc:" "  if False:" tests/training/per_client_loop_test.py tests/training/checkpoint_manifest_test.py
apply leaf_test_users_reordered tff_fedwin/data/leaf_convert.py "        self.test.append((user, n))" "        self.test.insert(0, (user, n))" tests/data/leaf_cache_test.py
apply weighted_accuracy_unweighted tff_fedwin/training/client_metrics.py "          float(np.sum(sums[:, CORRECT])) / counted if counted else 0.0" "          float(np.mean(accuracy)) if counted else 0.0" tests/training/per_client_loop_test.py
# (Stop 62: rollback_unverified retargeted at check_store; undo_precedence_reversed gone with the
# undo logs; store_entries_relative_again retargeted at the store's common directory.)
apply rollback_unverified tff_fedwin/training/checkpoints.py "      problem = manifest_lib.check_store(" "      problem = None and manifest_lib.check_store(" tests/training/damaged_checkpoint_test.py -k no_intact
apply store_entries_relative_again tff_fedwin/training/checkpoint_manifest.py "        if group == CLIENT_STATES and paths" "        if False" tests/training/loop_resume_test.py -k resumed_disk_store
# Stop 62's defects (run alone: bash <(sed -n '1,/^apply server_opt/{/^apply server_opt/!p}; /^# Stop 62/,$p' this file)).
apply first_state_rule_dropped tff_fedwin/training/disk_client_states.py "      if slot is None and not self._has_state(row):" "      if slot is None:" tests/training/disk_client_states_test.py
apply merge_past_kept_versions tff_fedwin/training/disk_client_states.py "      floor = min([k for k in kept_rounds if 0 < k < round_num] + [round_num])" "      floor = round_num" tests/training/disk_client_states_test.py
apply chain_states_unchecked tff_fedwin/training/disk_store_chain.py "      if _read_crc(source, row_bytes, slot) != crc:" "      if False:" tests/training/disk_store_chain_test.py
apply read_unchecked tff_fedwin/training/disk_client_states.py "      if chain_lib.row_crc(leaves) != crc:" "      if False:" tests/training/disk_client_states_test.py
apply stackoverflow_centralized_again tff_fedwin/tasks/tff_baselines.py "  test_data = datasets.eval_preprocess_fn(_in_client_order(datasets.test_data))" "  test_data = datasets.get_centralized_test_data()" tests/tasks/registry_test.py -k stackoverflow
# Stop 63's defects (LEAF Sent140, CelebA, Reddit; run alone: bash <(sed -n '1,/^apply server_opt/{/^apply server_opt/!p}; /^# Stop 63/,$p' this file)).
apply sent140_case_folded tff_fedwin/data/leaf_sent140.py "  return _WORDS.findall(line)" "  return _WORDS.findall(line.lower())" tests/data/leaf_sent140_test.py
apply sent140_pads_with_zero tff_fedwin/data/leaf_sent140.py "    rows.append(ids + [unknown] * (SEQ_LENGTH - len(ids)))" "    rows.append(ids + [0] * (SEQ_LENGTH - len(ids)))" tests/data/leaf_sent140_test.py
apply celeba_other_filter tff_fedwin/data/leaf_celeba.py "            image.resize((IMAGE_SIZE, IMAGE_SIZE)).convert('RGB')" "            image.resize((IMAGE_SIZE, IMAGE_SIZE), Image.NEAREST).convert('RGB')" tests/data/leaf_celeba_test.py
apply celeba_images_not_in_key tff_fedwin/data/leaf_cache.py "    record.append(['images_dir', images, digest])" "    record.append(['images_dir', images])" tests/data/leaf_celeba_test.py
apply pickle_loads_objects tff_fedwin/data/leaf_reddit.py "      data = _NoObjectsUnpickler(io.BytesIO(f.read())).load()" "      data = pickle.load(f)" tests/data/leaf_reddit_test.py
apply reddit_counts_ignored tff_fedwin/data/leaf_reddit.py "ids.get(t, unknown) if c == 1 else vocab.pad_id" "ids.get(t, unknown) if True else vocab.pad_id" tests/data/leaf_reddit_test.py
apply batch_norm_per_position tff_fedwin/tasks/leaf_models.py "    axes = list(range(len(inputs.shape) - 1))" "    axes = [0]" tests/tasks/leaf_models_test.py
apply reddit_rates_of_characters tff_fedwin/experiments/task_defaults.py "    if kind == 'reddit':" "    if False:" tests/experiments/task_defaults_test.py
