#!/usr/bin/env bash
# Issue 65 items 1, 2 and 6 (index entries, forks): one defect at a time with the tests that
# must catch it (results/test_costs/mutation_lib.sh).
source "$(dirname "$0")/mutation_lib.sh"
apply no_rows_copy tff_fedwin/training/checkpoint_manifest.py "  metrics_rows.write_copy(" "  (lambda *a: None)(" tests/training/metrics_rows_test.py
apply rows_never_restored tff_fedwin/training/metrics_rows.py "        and check_csv(metrics_csv, manifest)" "        and False" tests/training/metrics_rows_test.py
apply metrics_csv_not_fsynced tff_fedwin/training/checkpoint_manifest.py "  rows = [metrics_csv] if metrics_csv and os.path.exists(metrics_csv) else []" "  rows = []" tests/training/checkpoint_manifest_test.py
apply round_0_fallback_allowed tff_fedwin/training/checkpoints.py "    if found.round_num == 0 and problems:" "    if False:" tests/training/metrics_rows_test.py
apply changed_per_client_rows_not_refused tff_fedwin/training/metrics_rows.py "  if os.path.exists(path):" "  if False:" tests/training/per_client_loop_test.py
apply outside_files_not_kept tff_fedwin/training/set_aside.py "    if os.path.isfile(source):" "    if False:" tests/training/damaged_checkpoint_test.py -k "fedavg_window and saved_model"
apply newer_segments_not_kept tff_fedwin/training/set_aside.py "      if r > round_num" "      if False" tests/training/damaged_checkpoint_test.py -k scaffold_disk
apply old_store_deleted tff_fedwin/training/disk_client_states.py "      kept = set_aside.keep_store(" "      kept = None and set_aside.keep_store(" tests/training/disk_client_states_test.py
apply index_entries_unchecked tff_fedwin/training/disk_store_chain.py "    _check_entries(directory, segment, len(base.created))" "    pass" tests/training/disk_store_chain_test.py
apply fork_unverified tff_fedwin/training/checkpoints.py "      _, problem = manifest_lib.check_version(self.directory, version)" "      problem = None" tests/experiments/forks_test.py -k damaged_trunk
apply fork_rows_from_edited_csv tff_fedwin/training/forks.py "    return copy" "    return trunk.metrics_csv" tests/experiments/forks_test.py -k vouches
