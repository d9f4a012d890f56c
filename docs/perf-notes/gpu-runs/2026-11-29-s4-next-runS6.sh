#!/usr/bin/env bash
# Next device session (each line one call, < 10 min):
#   bash .whl/runS6.sh correctness   GPU tests of pruners + ModelCorrectness v2 (replayed decisions), check_grid
#   bash .whl/runS6.sh quick         the quick asv subset (its correctness gate must pass with v2)
#   bash .whl/runS6.sh linear        bench_ragged_linear --models with the per-layer tiles
set -uo pipefail
export PYTHONUNBUFFERED=1
case ${1:-correctness} in
  correctness)
    timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners tests/benchmarks 2>&1 | tee $OUT/gpu-tests.log | tail -4
    timeout 360 python3 -m pruners.check_grid 2>&1 | tee $OUT/check_grid.md | grep -v Warning | tail -40
    ;;
  quick) NO_TESTS=1 LIMIT=300 bash .whl/runS3.sh quick ;;
  linear) timeout 400 python3 scripts/bench_ragged_linear.py --batch 32 --models 2>&1 | tee $OUT/bench_ragged_linear.md ;;
esac
