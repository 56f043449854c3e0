#!/usr/bin/env bash
# Regenerates the LEAF directories here with LEAF's own scripts, on made-up plays.
#
# Usage: bash tests/data/leaf_generated/make.sh LEAF_CHECKOUT
#   LEAF_CHECKOUT: a git checkout of github.com/TalwalkarLab/leaf (commit in README.md here).
# Runs LEAF's data/shakespeare/preprocess.sh (preprocess_shakespeare.py, gen_all_data.py,
# sample.py, remove_users.py, split_data.py) in a temporary copy, once by sample and once by
# user, and copies each data/train and data/test here; then LEAF's Synthetic generator
# (data/synthetic/main.py) and CelebA's metadata_to_json.py (on made_up_celeba.py's metadata),
# each through LEAF's utils/preprocess.sh by sample; and Sent140's data_to_json.sh (its
# combine_data.py, data_to_json.py) on made_up_tweets.py's CSV files, by sample; and Reddit's
# source/preprocess.py and build_vocab.py on made_up_reddit.py's comments (preprocess.py with its
# tabs expanded: as written it mixes tabs and spaces, a TabError in Python 3). Needs python3 and python on PATH with numpy
# and scipy (e.g. PATH=.venv/bin:$PATH) for the Synthetic generator.
set -euo pipefail
leaf=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -C "$leaf" archive HEAD data/shakespeare data/synthetic data/celeba data/sent140 data/reddit data/utils |
  tar -x -C "$work"
raw="$work/data/shakespeare/data/raw_data"
mkdir -p "$raw"
python3 "$here/made_up_plays.py" > "$raw/raw_data.txt"

run() {  # name, dataset, preprocess.sh arguments...
  local name=$1 dataset=$2; shift 2
  (cd "$work/data/$dataset" && rm -rf data/sampled_data data/rem_user_data data/train \
    data/test meta && ./preprocess.sh "$@" > "$work/$name.log")
  rm -rf "${here:?}/$name"
  mkdir -p "$here/$name"
  cp -r "$work/data/$dataset/data/train" "$work/data/$dataset/data/test" "$here/$name/"
}
run shakespeare_sample shakespeare -s niid --sf 1.0 -k 0 -t sample --tf 0.5 --smplseed 1 --spltseed 1 --nochecksum
run shakespeare_user shakespeare -s niid --sf 1.0 -k 0 -t user --tf 0.8 --smplseed 1 --spltseed 1 --nochecksum
(cd "$work/data/synthetic" && python3 main.py -num-tasks 4 -num-classes 3 -num-dim 10 -seed 1 \
  > "$work/synthetic_main.log")
run synthetic_sample synthetic -s niid --sf 1.0 -k 5 -t sample --tf 0.6 --smplseed 1 --spltseed 1 --nochecksum
python3 "$here/made_up_celeba.py" "$work/data/celeba/data/raw"
run celeba_sample celeba -s niid --sf 1.0 -k 5 -t sample --tf 0.6 --smplseed 1 --spltseed 1 --nochecksum
python3 "$here/made_up_tweets.py" "$work/data/sent140/data/raw_data"
run sent140_sample sent140 -s niid --sf 1.0 -k 3 -t sample --tf 0.6 --smplseed 1 --spltseed 1 --nochecksum
python3 "$here/made_up_reddit.py" "$work/data/reddit/data/reddit_json"
(cd "$work/data/reddit" && expand -t 4 source/preprocess.py > source/preprocess_expanded.py &&
  python3 source/preprocess_expanded.py > "$work/reddit.log" &&
  python3 build_vocab.py --data-dir data/reddit_leaf/train --target-dir vocab --vocab-size 30 \
    >> "$work/reddit.log")
rm -rf "${here:?}/reddit_sample"
mkdir -p "$here/reddit_sample"
cp -r "$work/data/reddit/data/reddit_leaf/"{train,val,test} "$work/data/reddit/vocab" "$here/reddit_sample/"
