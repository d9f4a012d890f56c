#!/usr/bin/env bash
# Next device session (session 6), one call per line, rebuild .whl/repo.bundle first (git bundle create .whl/repo.bundle main):
#   TAG=partA bash .whl/runS3.sh partA ; bash .whl/runS3.sh partB     the full suite re-timed (<= 15 min?), ~6 + ~9 min
#   bash .whl/runS8.sh kernels    variant sweeps (128-row tiles; head dims 128 and 32), the issue-3 tables, GPU tests
#   bash .whl/runS8.sh e2e        bench_e2e: all pruners, DeiT-B 224 B 64/256 + DeiT-S B 1/4 (replayed decisions, steady warm-up);
#                                 where 2c's missing time goes (scripts/profile_pruned_forward.py)
set -uo pipefail
export PYTHONUNBUFFERED=1
case ${1:-kernels} in
  kernels)
    timeout 200 python3 scripts/bench_kernels.py --variants --json $OUT/variants.json 2>&1 | tee $OUT/variants.md
    for d in 128 32; do timeout 120 python3 scripts/bench_kernels.py --variants --head-dim $d 2>&1 | tee $OUT/variants-d$d.md | tail -12; done
    timeout 200 python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    tail -60 $OUT/bench_kernels.md
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ragged_kernels tests/pruners tests/benchmarks 2>&1 | tee $OUT/gpu-tests.log | tail -3
    ;;
  e2e)
    timeout 240 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 \
      --time-box 190 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    timeout 200 python3 -m pruners.bench_e2e --models deit_small_patch16_224 deit_base_patch16_224 --batches 1 4 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box 150 2>&1 \
      | tee $OUT/bench_e2e_s.md | tail -20
    timeout 120 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph 2>&1 \
      | grep -v Warn | tee $OUT/profile_pruned_forward.md
    ;;
esac
