#!/usr/bin/env bash
# Runs our side (scripts/run_experiment.py, TFF) on the same data and settings
# as run_theirs.sh: FedAvg and FedAvg + IMA, seeds 0 1 2, one at a time.
#   ROUNDS (60), R_IMA (36: the authors' 0-based start round), SEEDS ("0 1 2"),
#   METHODS ("fedavg ima"), AUTHORS_DATA (/tmp/authors_data),
#   OURS_ROOT (/tmp/authors_ours: run directories; a rerun resumes them)
# Copies each run's metrics.csv to runs_ours/<method>_seed<s>.csv and appends
# its wall time to runs_ours/timings.csv.
#
# Round counting: the authors count rounds t = 0, 1, ... and use client lr
# 0.01 * 0.99^t; IMA averages from t >= r_ima (and t >= W) with lr
# 0.01 * 0.99^r_ima * 0.97^(t - r_ima). We count rounds 1, 2, ... with
# lr0 * 0.99^t before t_s and lr0 * 0.99^t_s * 0.97^(t - t_s) from t_s on, the
# window active from max(W, t_s). With lr0 = 0.01 / 0.99 and t_s = r_ima + 1
# both give the same rate in the same round (our round t = their t - 1), and
# the window becomes active in the same round.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ROUNDS="${ROUNDS:-60}"; R_IMA="${R_IMA:-36}"; SEEDS="${SEEDS:-0 1 2}"
METHODS="${METHODS:-fedavg ima}"
DATA="${AUTHORS_DATA:-/tmp/authors_data}"; ROOT="${OURS_ROOT:-/tmp/authors_ours}"
PY="$REPO/.venv/bin/python"
OUT="$HERE/runs_ours"
mkdir -p "$OUT" "$ROOT"

COMMON=(
  --task=leaf --data_dir="$DATA/leaf" --leaf_kind=femnist --model=ima_cnn
  --algorithm=fedavg --clients_per_round=10 --client_epochs=1 --client_batch_size=50
  --client_shuffle_buffer=2000            # >= the largest client (1,680): a full shuffle, as their DataLoader
  --client_learning_rate=0.010101010101010102   # 0.01 / 0.99, see above
  --client_momentum=0.9
  --total_rounds="$ROUNDS" --rounds_per_eval=1 --rounds_per_checkpoint="$ROUNDS"
  --root_output_dir="$ROOT"
)
# Their client SGD has weight_decay=0.001 (utils/optimizer.py). Passed only if
# this checkout's script has the flag.
# (absl's --helpfull exits 1: its output is read first, the status ignored.)
HELP="$("$PY" "$REPO/scripts/run_experiment.py" --helpfull 2>/dev/null || true)"
if grep -q -- '--client_weight_decay' <<< "$HELP"; then
  COMMON+=(--client_weight_decay=0.001)
  echo "with --client_weight_decay=0.001"
else
  echo "scripts/run_experiment.py has no --client_weight_decay: runs without weight decay"
fi

[[ -f "$OUT/timings.csv" ]] || echo "method,seed,rounds,r_ima,seconds" > "$OUT/timings.csv"
for seed in $SEEDS; do
  for method in $METHODS; do
    if [[ "$method" == ima ]]; then
      EXTRA=(--client_lr_schedule=ima --window_size=5 --window_mode=broadcast
             --window_start_round=$((R_IMA + 1)))
    else
      EXTRA=(--client_lr_schedule=decay)
    fi
    name="${method}_seed${seed}"
    start=$(date +%s.%N)
    OMP_NUM_THREADS=1 taskset -c 0 "$PY" "$REPO/scripts/run_experiment.py" "${COMMON[@]}" \
      "${EXTRA[@]}" --seed="$seed" --experiment_name="$name" > "$ROOT/$name.log" 2>&1
    secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    cp "$ROOT/$name/metrics.csv" "$OUT/$name.csv"
    echo "$method,$seed,$ROUNDS,$R_IMA,$secs" >> "$OUT/timings.csv"
    echo "$name: $secs s"; tail -4 "$ROOT/$name.log"
  done
done
