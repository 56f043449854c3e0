#!/usr/bin/env bash
# Issue 65 items 5 and 6 (LEAF cache trust, hostile inputs): one defect at a time with the
# tests that must catch it (results/test_costs/mutation_lib.sh).
source "$(dirname "$0")/mutation_lib.sh"
# Item 5: the LEAF cache is used only when it is ours.
apply entry_owner_unchecked tff_fedwin/data/leaf_cache_trust.py "  if info.st_uid != os.geteuid():" "  if False:" tests/data/leaf_cache_trust_test.py
apply symlink_followed tff_fedwin/data/leaf_cache_trust.py $'    info = os.lstat(path)\n  except FileNotFoundError:' $'    info = os.stat(path)\n  except FileNotFoundError:' tests/data/leaf_cache_trust_test.py -k symlink
apply cache_dir_owner_unchecked tff_fedwin/data/leaf_cache.py "  problem = trust.foreign(root) or trust.foreign(stat_keys)" "  problem = None" tests/data/leaf_cache_trust_test.py -k cache_directory
apply failed_rename_taken_as_ours tff_fedwin/data/leaf_cache.py "      problem = trust.foreign(directory)" "      problem = None" tests/data/leaf_cache_trust_test.py -k during
apply transient_error_deletes tff_fedwin/data/leaf_cache_entry.py "    if e.errno in trust.DAMAGE_ERRNOS:" "    if True:" tests/data/leaf_cache_trust_test.py -k transient
apply converter_version_not_in_key tff_fedwin/data/leaf_cache.py $'  files = json_files(data_dir, eval_dir)\n  records = [FORMAT, leaf_convert.CONVERTER_VERSION, *options]' $'  files = json_files(data_dir, eval_dir)\n  records = [FORMAT, *options]' tests/data/leaf_cache_trust_test.py -k older_converter
# Item 6: hostile inputs get one line.
apply leaf_json_limits_uncaught tff_fedwin/data/leaf.py "  except json_limits.LIMIT_ERRORS as e:  # Deep nesting, a huge integer." "  except () as e:" tests/data/hostile_json_test.py -k leaf_file
apply sent140_vocab_limits_uncaught tff_fedwin/data/leaf_sent140.py "  except json_limits.LIMIT_ERRORS as e:  # Deep nesting, a huge integer." "  except () as e:" tests/data/hostile_json_test.py -k vocabulary
apply jsonl_limits_uncaught tff_fedwin/data/text_records.py "    except json_limits.LIMIT_ERRORS as e:  # Deep nesting, a huge integer." "    except () as e:" tests/data/hostile_json_test.py -k jsonl
apply npz_cap_ignored tff_fedwin/data/npz_limits.py "    if total > max_bytes:" "    if False:" tests/data/sources_npz_limits_test.py
apply npz_header_claim_trusted tff_fedwin/data/npz_limits.py "    if claimed > size and not dtype.hasobject:" "    if False:" tests/data/sources_npz_limits_test.py -k forged
apply max_npz_bytes_not_passed tff_fedwin/tasks/data_files.py "        max_bytes=max_npz_bytes," "" tests/scripts/run_experiment_cli_test.py -k npz_bomb
apply max_npz_bytes_negative_accepted tff_fedwin/experiments/data_flags.py "    checks.check_int('--max_npz_bytes', config.max_npz_bytes, minimum=0)" "    pass" tests/experiments/config_test.py tests/experiments/config_problems_test.py -k max_npz
