#!/usr/bin/env bash
# Formats the tree with pyink in TFF's style: 2-space indentation, 80 columns,
# majority quotes. tests/format_test.py runs it with --check.
# Usage: bash scripts/format.sh [pyink options] [paths]   (default paths: the tree)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
paths=()
for arg in "$@"; do [[ "$arg" == -* ]] || paths+=("$arg"); done
[ ${#paths[@]} -gt 0 ] || set -- "$@" tff_fedwin benchmarks tests scripts
exec "$PYTHON" -m pyink --line-length=80 --pyink-indentation=2 \
  --pyink-use-majority-quotes --target-version=py311 "$@"
