#!/usr/bin/env bash
# Device run D: pruners GPU smoke test of bench_e2e, then the issue-4 first set, time-boxed.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/pruners/test_bench_e2e.py 2>&1 | tail -n 3
timeout 290 python3 -m pruners.bench_e2e --order issue4-first --exact-capacity --repeats 5 --min-time 0.1 \
  --time-box 225 --json $OUT/bench_e2e.json > $OUT/bench_e2e.md 2>&1
echo "bench_e2e rc=$?"
grep -v "^W1129\|is_fx_tracing" $OUT/bench_e2e.md | sed -n '/targets/,$p' | head -n 60
