#!/usr/bin/env bash
# Runs the authors' loop (extracted by fetch_and_extract.sh) on the shared data
# (make_data.sh): FedAvg and FedAvg + IMA, seeds 0 1 2, one at a time, one thread.
#   ROUNDS (60), R_IMA (36: IMA from their 0-based round 36 = our round 37),
#   SEEDS ("0 1 2"), METHODS ("fedavg ima"), FEDIMA_WORK (/tmp/fedima_work),
#   AUTHORS_DATA (/tmp/authors_data), TORCH_PY (/tmp/torchenv/bin/python),
#   LOG_DIR (/tmp/authors_theirs_logs), VARIANT ('': their loop; '_keras_init':
#   the diagnostic variant with Keras' initialization, into runs_theirs_keras_init/)
# Writes runs_theirs/<method>_seed<s>.csv (round,accuracy; rounds 1..ROUNDS)
# and appends each run's wall time to runs_theirs/timings.csv.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROUNDS="${ROUNDS:-60}"; R_IMA="${R_IMA:-36}"; SEEDS="${SEEDS:-0 1 2}"
METHODS="${METHODS:-fedavg ima}"
SRC="${FEDIMA_WORK:-/tmp/fedima_work}/src"; DATA="${AUTHORS_DATA:-/tmp/authors_data}"
PY="${TORCH_PY:-/tmp/torchenv/bin/python}"; LOGS="${LOG_DIR:-/tmp/authors_theirs_logs}"
VARIANT="${VARIANT:-}"
OUT="$HERE/runs_theirs$VARIANT"
mkdir -p "$OUT" "$LOGS"
[[ -f "$OUT/timings.csv" ]] || echo "method,seed,rounds,r_ima,seconds" > "$OUT/timings.csv"
for seed in $SEEDS; do
  for method in $METHODS; do
    start=$(date +%s.%N)
    (cd "$SRC" && MPLBACKEND=Agg OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
      FEDIMA_ROUNDS="$ROUNDS" FEDIMA_R_IMA="$R_IMA" FEDIMA_SEED="$seed" \
      FEDIMA_DATA_NPZ="$DATA/mnist.npz" FEDIMA_PARTITION_JSON="$DATA/partition.json" \
      FEDIMA_OUT_CSV="$OUT/${method}_seed${seed}.csv" \
      "$PY" "authors_loop_${method}${VARIANT}.py" > "$LOGS/${method}${VARIANT}_seed${seed}.log" 2>&1)
    secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    echo "$method,$seed,$ROUNDS,$R_IMA,$secs" >> "$OUT/timings.csv"
    echo "$method seed $seed: $secs s, last accuracy $(tail -1 "$OUT/${method}_seed${seed}.csv")"
  done
done
