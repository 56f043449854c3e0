#!/usr/bin/env bash
# Brings the IMA authors' code (github.com/TailinZhou/FedIMA) at a fixed commit
# into a scratch directory and extracts their training loop from their notebook.
# None of their code is kept in this repository; this script recreates it.
#
#   FEDIMA_GIT_DIR  a local git dir (bare or not) holding the commit; unset: the
#                   script clones https://github.com/TailinZhou/FedIMA.git
#   FEDIMA_WORK     where to put it (default /tmp/fedima_work)
#
# Result: $FEDIMA_WORK/src, `git archive` of commit $COMMIT (their files, none
# modified: the last step checks that with `git status`), plus
#   * stand-ins for modules their code imports but the repository does not
#     contain (listed in README.md; none of them is called on the path we run),
#   * authors_loop_fedavg.py and authors_loop_ima.py, written by
#     extract_loop.py from their notebooks' code cells, verbatim, with their
#     data-loading cell replaced by ours (local MNIST arrays).
set -euo pipefail

COMMIT=3eaf289782da7a00ce7fcc532ca4112684186973   # FedIMA HEAD, "Add files via upload"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="${FEDIMA_WORK:-/tmp/fedima_work}"
SRC="$WORK/src"

mkdir -p "$WORK"
if [[ -n "${FEDIMA_GIT_DIR:-}" ]]; then
  GIT_DIR_USED="$FEDIMA_GIT_DIR"
else
  if [[ ! -d "$WORK/FedIMA.git" ]]; then
    git clone --bare https://github.com/TailinZhou/FedIMA.git "$WORK/FedIMA.git"
  fi
  GIT_DIR_USED="$WORK/FedIMA.git"
fi
git --git-dir="$GIT_DIR_USED" cat-file -e "$COMMIT^{commit}"

rm -rf "$SRC"
mkdir -p "$SRC"
git --git-dir="$GIT_DIR_USED" archive "$COMMIT" | tar -x -C "$SRC"
echo "extracted FedIMA@$COMMIT into $SRC"

# --- stand-ins for modules their code imports and the repository lacks ---------
# torchvision: not installed (see README.md); only imported on our path.
mkdir -p "$SRC/torchvision"
cat > "$SRC/torchvision/__init__.py" <<'EOF'
"""Stand-in for torchvision (not installed): importable, unusable.

The FedIMA files import torchvision at module level; on the path run here
(local MNIST arrays, the `fmnist` CNN) nothing of it is called. Any use fails.
"""
from . import datasets, models, transforms  # noqa: F401
EOF
for sub in datasets models transforms; do
  cat > "$SRC/torchvision/$sub.py" <<'EOF'
class _Unavailable:
  def __init__(self, name):
    self._name = name
  def __call__(self, *args, **kwargs):
    raise RuntimeError(f'torchvision stand-in: {self._name} is not available')
  def __getattr__(self, attr):
    return _Unavailable(f'{self._name}.{attr}')
def __getattr__(name):
  return _Unavailable(f'{__name__}.{name}')
EOF
done
# fedlab/utils/__init__.py imports four modules that the vendored copy of
# FedLab does not contain.
for mod_cls in aggregator:Aggregators logger:Logger message_code:MessageCode \
               serialization:SerializationTool; do
  mod="${mod_cls%%:*}"; cls="${mod_cls##*:}"
  printf 'class %s:\n  """Stand-in: missing from the FedIMA copy of FedLab."""\n' "$cls" \
    > "$SRC/fedlab/utils/$mod.py"
done
# utils/global_test.py imports utils.tSNE and leaf.dataloader; server_se1.py
# imports utils.bias_var_covar_analysis. None is in the repository.
printf 'class FeatureVisualize:\n  """Stand-in: missing from FedIMA."""\n' > "$SRC/utils/tSNE.py"
printf '"""Stand-in: missing from FedIMA."""\n' > "$SRC/utils/bias_var_covar_analysis.py"
mkdir -p "$SRC/leaf"
: > "$SRC/leaf/__init__.py"
printf 'def get_LEAF_all_test_dataloader(*args, **kwargs):\n  raise RuntimeError("stand-in: missing from FedIMA")\n' \
  > "$SRC/leaf/dataloader.py"
# Directories their loop writes into (partition report, models, acc lists).
mkdir -p "$SRC/data/fmnist" "$SRC/acc results"
for seed in 0 1 2 3 4; do mkdir -p "$SRC/results/Test/label skew/mnist/fedavg/seed$seed"; done

# --- their loop, from the notebooks ---------------------------------------------
python3 "$HERE/extract_loop.py" "$SRC"

# --- proof that none of their files is changed -----------------------------------
export GIT_INDEX_FILE="$WORK/fedima.index"
g() { git --git-dir="$GIT_DIR_USED" --work-tree="$SRC" "$@"; }
g read-tree "$COMMIT"
g update-index -q --refresh || true
changed="$(g diff-files --name-status)"
if [[ -n "$changed" ]]; then
  echo "their files changed:"; echo "$changed"; exit 1
fi
echo "their $(g ls-files | wc -l) files unchanged against $COMMIT (git diff-files empty); added:"
g ls-files --others | sed 's/^/  /'
