#!/usr/bin/env bash
# Next device session (each line one call, < 10 min); rebuild .whl/repo.bundle first for quick/partA/partB.
#   bash .whl/runS6.sh correctness   GPU tests of pruners, benchmarks and ragged_kernels, then the full check_grid
#   bash .whl/runS6.sh kernels       bench_kernels --variants, bench_kernels --quick tables, bench_ats_sampler --models
#   bash .whl/runS6.sh quick         the quick asv subset (ModelCorrectness v2's gate must pass)
#   bash .whl/runS6.sh linear        bench_ragged_linear --models (per-layer tiles); Threshold-L2 2c with calibrated capacity
#   TAG=partA bash .whl/runS3.sh partA; bash .whl/runS3.sh partB    the full suite re-timed (EndToEnd v2 warm-up)
set -uo pipefail
export PYTHONUNBUFFERED=1
case ${1:-correctness} in
  correctness)
    timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners tests/benchmarks tests/ragged_kernels \
      2>&1 | tee $OUT/gpu-tests.log | tail -4
    timeout 330 python3 -m pruners.check_grid 2>&1 | tee $OUT/check_grid.md | grep -v Warning | tail -40
    ;;
  kernels)
    timeout 200 python3 scripts/bench_kernels.py --variants --json $OUT/variants.json 2>&1 | tee $OUT/variants.md
    timeout 200 python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    tail -60 $OUT/bench_kernels.md
    timeout 200 python3 scripts/bench_ats_sampler.py --models 2>&1 | tee $OUT/bench_ats_sampler.md
    ;;
  quick) NO_TESTS=1 LIMIT=300 bash .whl/runS3.sh quick ;;
  linear)
    timeout 250 python3 scripts/bench_ragged_linear.py --batch 32 --models 2>&1 | tee $OUT/bench_ragged_linear.md
    timeout 300 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 \
      --time-box 240 2>&1 | tee $OUT/bench_e2e_capacity.md | tail -30
    ;;
esac
