#!/usr/bin/env bash
# Regenerates the LEAF directories here with LEAF's own scripts, on made-up plays.
#
# Usage: bash tests/data/leaf_generated/make.sh LEAF_CHECKOUT
#   LEAF_CHECKOUT: a git checkout of github.com/TalwalkarLab/leaf (commit in README.md here).
# Runs LEAF's data/shakespeare/preprocess.sh (preprocess_shakespeare.py, gen_all_data.py,
# sample.py, remove_users.py, split_data.py) in a temporary copy, once by sample and once by
# user, and copies each data/train and data/test here. Needs python3 on PATH (no packages).
set -euo pipefail
leaf=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -C "$leaf" archive HEAD data/shakespeare data/utils | tar -x -C "$work"
raw="$work/data/shakespeare/data/raw_data"
mkdir -p "$raw"
python3 "$here/made_up_plays.py" > "$raw/raw_data.txt"

run() {  # name, preprocess.sh arguments...
  local name=$1; shift
  (cd "$work/data/shakespeare" && rm -rf data/sampled_data data/rem_user_data data/train \
    data/test meta && ./preprocess.sh "$@" > "$work/$name.log")
  rm -rf "${here:?}/$name"
  mkdir -p "$here/$name"
  cp -r "$work/data/shakespeare/data/train" "$work/data/shakespeare/data/test" "$here/$name/"
}
run shakespeare_sample -s niid --sf 1.0 -k 0 -t sample --tf 0.5 --smplseed 1 --spltseed 1 --nochecksum
run shakespeare_user -s niid --sf 1.0 -k 0 -t user --tf 0.8 --smplseed 1 --spltseed 1 --nochecksum
