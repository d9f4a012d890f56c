#!/usr/bin/env bash
# Run CI (`.ci/run`) the way it runs on a submission: on a fresh clone of a commit (default: main),
# with its own fresh .venv. The clone (~6 GB with its virtualenv) is deleted afterwards, pass or
# fail, so repeated checks do not fill the disk (a full disk once failed CI's pip install).
#
#   bash tools/ci_clean_clone.sh [REV]       # log: $TMPDIR/ci-clean-clone.log
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=${1:-main}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ci-clean-clone.XXXXXX")
log="${TMPDIR:-/tmp}/ci-clean-clone.log"
trap 'rm -rf "$dir"' EXIT
git clone -q "$repo" "$dir/repo"
git -C "$dir/repo" checkout -q "$rev"
echo "== CI on a clean clone of $rev ($(git -C "$dir/repo" rev-parse --short HEAD)); log: $log"
set +e
(cd "$dir/repo" && CI=true bash .ci/run) >"$log" 2>&1
rc=$?
set -e
tail -n 5 "$log"
echo "== exit $rc"
exit $rc
