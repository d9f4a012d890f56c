#!/usr/bin/env bash
# Session-3 device runs: one commit of main through `python -m ci run`, timestamped per line.
#   bash .whl/runS3.sh quick       the quick PR subset (issue 5: <= 4 min), then GPU tests of ragged_kernels
#   bash .whl/runS3.sh partA       full suite, bench_attention + bench_pack
#   bash .whl/runS3.sh partB       full suite, bench_correctness + bench_end_to_end
#   bash .whl/runS3.sh aa          time_gpu classes again (second half of the A/A pair)
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
MODE=$1; TAG=${TAG:-$MODE}; W=$PWD/.whl; T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps $(ls .whl/*.whl | grep -v '/pip-') 2>&1 | tail -2
rm -rf /tmp/repo; git clone -q .whl/repo.bundle /tmp/repo && cd /tmp/repo && git checkout -q main || exit 3
HEAD=$(git rev-parse HEAD); echo "mode=$MODE head=$HEAD setup took $(( $(date +%s) - T0 ))s"
case $MODE in
  quick) SEL=(--quick) ;;
  partA) SEL=(-b '^bench_attention\.|^bench_pack\.') ;;
  partB) SEL=(-b "^(?!bench_end_to_end\.EndToEnd(PR)?\.\w+\(.*'(padded_sdpa|nested_sdpa)', 'graph'\))(bench_correctness\.|bench_end_to_end\.)") ;;
  aa)    SEL=(-b '^bench_attention\.AttentionKernels(PR)?\.time_gpu|^bench_pack\.PackTokens\.time_gpu') ;;
esac
T1=$(date +%s)
timeout ${LIMIT:-540} python3 -m ci run --commits $HEAD --no-resume --machine h200 --dashboard '' "${SEL[@]}" \
  --wheelhouse $W --db $OUT/$TAG.sqlite 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(( $(date +%s) - T1 ))" "$l"; done > $OUT/$TAG.log
echo "$MODE: rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - T1 ))s"
grep -E "^[0-9]+ \[ *[0-9.]+%\] ··· |measured in|runner\]|error" $OUT/$TAG.log | cut -c1-140 | tail -n 40
tar czf $OUT/asv-results-$TAG.tgz .asv/results 2>/dev/null
if [ "$MODE" = quick ] && [ -z "${NO_TESTS:-}" ]; then
  T2=$(date +%s); timeout 150 python3 -m pytest -q -m gpu -x tests/ragged_kernels -p no:cacheprovider 2>&1 | tail -3
  echo "gpu tests wall=$(( $(date +%s) - T2 ))s"
fi
