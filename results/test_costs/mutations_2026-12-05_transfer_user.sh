#!/usr/bin/env bash
# Issue 65 items 3 (a transfer directory per run) and 4 (workers serve only their user): one
# defect at a time with the tests that must catch it (results/test_costs/mutation_lib.sh).
source "$(dirname "$0")/mutation_lib.sh"
apply transfer_dir_not_per_run tff_fedwin/experiments/registry.py "        f'{config.experiment_name}-{run_id}'," "        f'{config.experiment_name}'," tests/experiments/run_transfer_dir_test.py
apply transfer_dir_not_locked tff_fedwin/experiments/run.py $'      run_lock.TransferDirectoryLockedError,\n  ):\n    yield' $'      run_lock.TransferDirectoryLockedError,\n  ) if False else contextlib.nullcontext():\n    yield' tests/experiments/run_transfer_dir_test.py -k refused
apply exit_removes_all_client_data tff_fedwin/experiments/run.py "  directory = registry.transfer_dirs(config, run_id).client_data" "  directory = registry.transfer_dirs(config, run_id).root + '/..'" tests/experiments/run_transfer_dir_test.py -k only_its_own
apply shim_accepts_any_tcp_uid tff_fedwin/runtime/loopback_bind.c "  return owner == (unsigned long)uid;" "  return 1;" tests/runtime/worker_user_test.py -k "refused_before or only_connections"
apply shim_not_verified_in_maps tff_fedwin/runtime/loopback.py "  if os.path.realpath(library) not in mapped:" "  if False:" tests/runtime/worker_user_test.py -k without_the_shim
apply driver_connects_to_localhost tff_fedwin/runtime/workers.py "  worker.host = loopback.connect_host(address)" "  worker.host = 'localhost'" tests/runtime/worker_user_test.py -k driver_address
apply log_dir_owner_unchecked tff_fedwin/runtime/worker_logs.py $'    if st.st_uid != os.geteuid():\n      problem = (' $'    if False:\n      problem = (' tests/runtime/worker_user_test.py -k owned_by_another
apply log_dir_group_writable_accepted tff_fedwin/runtime/worker_logs.py "    elif mode & 0o022:" "    elif False:" tests/runtime/worker_user_test.py -k writable_log_dir
apply log_dir_symlink_followed tff_fedwin/runtime/worker_logs.py "os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC" "os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC" tests/runtime/worker_user_test.py -k symlink_planted
apply log_file_symlink_followed tff_fedwin/runtime/worker_logs.py "os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC" "os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC" tests/runtime/worker_user_test.py -k log_file_symlink
