#!/usr/bin/env bash
# Creates the project's virtual environment (.venv, ignored by git) with the pinned
# TensorFlow Federated 0.87 stack from requirements.txt, and installs tff_fedwin into it
# (editable). Idempotent: when requirements.txt and setup.py are unchanged since the last
# successful run, it only checks the environment and returns.
#
# Usage: bash scripts/setup_env.sh            (uses python3)
#        PYTHON=python3.11 bash scripts/setup_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${TFF_FEDWIN_VENV:-.venv}"

fail() { echo "setup_env: $*" >&2; exit 2; }

command -v "$PYTHON" >/dev/null 2>&1 || fail "'$PYTHON' was not found. Install Python 3.11 \
(TensorFlow Federated 0.87 supports 3.9-3.11; this lock is tested on 3.11) and run \
'PYTHON=python3.11 bash scripts/setup_env.sh'."

version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
  || fail "'$PYTHON' did not run. Install Python 3.11 (TensorFlow Federated 0.87 supports 3.9-3.11) \
and run 'PYTHON=python3.11 bash scripts/setup_env.sh'."
case "$version" in
  3.9|3.10|3.11) ;;
  *) fail "TensorFlow Federated 0.87 needs Python 3.9, 3.10 or 3.11, but '$PYTHON' is Python $version. \
Install Python 3.11 (for example 'pyenv install 3.11.7', or Debian/Ubuntu 'apt-get install python3.11 python3.11-venv') \
and run 'PYTHON=python3.11 bash scripts/setup_env.sh'." ;;
esac

stamp_want="python=$version $(cat requirements.txt setup.py | sha256sum | cut -d' ' -f1)"
stamp_file="$VENV/.tff_fedwin_stamp"

if [ -x "$VENV/bin/python" ]; then
  venv_version=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
  if [ "$venv_version" != "$version" ]; then
    echo "setup_env: $VENV has Python $venv_version, want $version: recreating it."
    rm -rf "$VENV"
  fi
fi

if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp_want" ]; then
  echo "setup_env: $VENV is up to date (Python $version, requirements.txt unchanged)."
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
rm -f "$stamp_file"
echo "setup_env: installing the pinned stack into $VENV (a few minutes on a cold cache) ..."
# --no-deps: requirements.txt lists every transitive dependency, and TFF's own metadata
# pins jaxlib==0.4.14, which PyPI no longer serves; no resolver may run.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.txt
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" - <<'PY'
import tensorflow_federated as tff
import tff_fedwin
import tff_fedwin.runtime  # Also releases TFF's default context at exit.
assert tff.__version__ == "0.87.0", tff.__version__
print(f"setup_env: tensorflow_federated {tff.__version__}, tff_fedwin {tff_fedwin.__version__} import cleanly.")
PY
echo "$stamp_want" > "$stamp_file"
