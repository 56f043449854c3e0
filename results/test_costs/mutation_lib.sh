# Sourced by the mutations_*.sh scripts: `apply name file old new test-args...` copies HEAD of
# ${REPO:-/work/main} to /tmp/mutation/<name>, replaces the one occurrence of `old` in `file` by
# `new` and runs the tests that must catch the defect (-x: up to the first failure). A defect
# whose `old` does not occur exactly once is reported as NOT APPLIED and its tests are not run,
# so a stale script cannot pass for a caught defect.
set -u
REPO=${REPO:-/work/main}
cd "$REPO"
py=${PY:-/work/main/.venv/bin/python}
apply() {  # name, file, old, new, test args...
  local name=$1 file=$2 old=$3 new=$4; shift 4
  local dir=/tmp/mutation/$name
  rm -rf "$dir"; mkdir -p "$dir"
  git archive HEAD | tar -x -C "$dir"
  if ! $py - "$dir/$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
  sys.exit(f'{path}: {old!r} occurs {text.count(old)} times')
open(path, 'w').write(text.replace(old, new))
PY
  then
    echo "=== $name NOT APPLIED"
    return
  fi
  diff <(git show HEAD:"$file") "$dir/$file"
  echo "=== $name: $(date +%T) running $*"
  (cd "$dir" && PYTHONPATH="$dir" timeout 1800 $py -m pytest -q -x -n 0 -p no:cacheprovider "$@" 2>&1 | grep -E '^(FAILED|ERROR)|[0-9]+ (passed|failed)' | tail -3)
  echo "=== $name done $(date +%T)"
}
