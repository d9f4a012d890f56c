#!/usr/bin/env bash
# Session 4 device calls.
#   bash .whl/runS5.sh variants   GPU tests (attention incl. kernel variants, timer), then bench_kernels --variants
#   bash .whl/runS5.sh final      GPU tests of ragged_kernels (new configs, native launch by default),
#                                 bench_kernels --quick tables, the quick asv subset re-timed
set -uo pipefail
export PYTHONUNBUFFERED=1
case ${1:-variants} in
  variants)
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ragged_kernels/test_attention.py \
      tests/benchmarks/test_timing.py 2>&1 | tee $OUT/gpu-tests.log | tail -6
    timeout 330 python3 scripts/bench_kernels.py --variants --json $OUT/variants.json 2>&1 | tee $OUT/variants.md
    ;;
  final)
    T0=$(date +%s)
    timeout 110 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ragged_kernels 2>&1 | tee $OUT/gpu-tests.log | tail -4
    echo "gpu tests wall=$(( $(date +%s) - T0 ))s"
    timeout 130 python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json 2>&1 > $OUT/bench_kernels.md
    grep -v "^| [0-9]* | [0-9.]* |" $OUT/bench_kernels.md | head -5; grep -A12 "^## 1\." $OUT/bench_kernels.md; grep -A30 "^## 3\." $OUT/bench_kernels.md | tail -8
    grep -A5 "^## 4\." $OUT/bench_kernels.md; grep -A5 "^## 5\." $OUT/bench_kernels.md
    NO_TESTS=1 LIMIT=${QLIMIT:-190} bash .whl/runS3.sh quick
    ;;
esac
