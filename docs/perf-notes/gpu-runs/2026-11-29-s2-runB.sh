#!/usr/bin/env bash
# Device run B: the FULL asv suite on one commit through `python -m ci run` (forkserver), timestamped.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
W=$PWD/.whl
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps $(ls .whl/*.whl | grep -v '/pip-') 2>&1 | tail -2
rm -rf /tmp/repo; git clone -q .whl/repo.bundle /tmp/repo && cd /tmp/repo && git checkout -q main || exit 3
HEAD=$(git rev-parse HEAD); echo "head=$HEAD setup took $(( $(date +%s) - T0 ))s"
T1=$(date +%s)
timeout ${LIMIT:-500} python3 -m ci run --commits $HEAD --no-resume --machine h200 --dashboard '' \
  --wheelhouse $W --db $OUT/full.sqlite 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(( $(date +%s) - T1 ))" "$l"; done > $OUT/full-suite.log
echo "full suite: rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - T1 ))s"
grep -E "^[0-9]+ \[ *[0-9.]+%\] ··· |measured in|runner\]" $OUT/full-suite.log | cut -c1-150 | tail -n 60
tar czf $OUT/asv-results-full.tgz .asv/results
