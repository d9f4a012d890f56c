#!/usr/bin/env bash
# Session 6 device calls. Rebuild .whl/repo.bundle first is not needed (runs in the working tree).
#   bash .whl/runS9.sh sweep     128-row-tile variant sweep (head dim 64); where 2c's time goes; bench_e2e all pruners B 64/256
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
case ${1:-sweep} in
  sweep)
    timeout 220 python3 scripts/bench_kernels.py --variants --json $OUT/variants.json 2>&1 | tee $OUT/variants.md | cut -c1-400
    echo "variants done at $(( $(date +%s) - T0 ))s"
    timeout 140 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph 2>&1 \
      | grep -v Warn | tee $OUT/profile_pruned_forward.md
    echo "profile done at $(( $(date +%s) - T0 ))s"
    left=$(( 570 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 \
      --time-box $(( left - 25 )) 2>&1 | tee $OUT/bench_e2e_b.md | tail -14
    echo "all done at $(( $(date +%s) - T0 ))s"
    ;;
esac
case ${1:-sweep} in
  ops)
    timeout 100 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --ops 40 2>&1 \
      | grep -v Warn > $OUT/profile_ops.md; head -24 $OUT/profile_ops.md
    echo "ops done at $(( $(date +%s) - T0 ))s"
    TAG=partA LIMIT=$(( 585 - ($(date +%s) - T0) )) bash .whl/runS3.sh partA
    ;;
esac
case ${1:-sweep} in
  verify)
    timeout 90 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph 2>&1 \
      | grep -v Warn | tee $OUT/profile_pruned_forward.md | tail -22
    echo "profile done at $(( $(date +%s) - T0 ))s"
    timeout 130 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 \
      --time-box 110 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    echo "e2e done at $(( $(date +%s) - T0 ))s"
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners 2>&1 | tee $OUT/gpu-tests.log | tail -4
    echo "tests done at $(( $(date +%s) - T0 ))s"
    left=$(( 570 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -30
    echo "all done at $(( $(date +%s) - T0 ))s"
    ;;
esac
case ${1:-sweep} in
  final)
    timeout 70 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 dynamicvit --batches 64 256 \
      --backends triton dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 --time-box 55 2>&1 \
      | tee $OUT/bench_e2e_rlin.md | tail -8
    echo "e2e rlin done at $(( $(date +%s) - T0 ))s"
    timeout 110 python3 -m pruners.bench_e2e --models deit_small_patch16_224 deit_base_patch16_224 --batches 1 4 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box 90 2>&1 \
      | tee $OUT/bench_e2e_s.md | tail -20
    echo "e2e small done at $(( $(date +%s) - T0 ))s"
    NO_TESTS=1 LIMIT=$(( 480 - ($(date +%s) - T0) )) bash .whl/runS3.sh quick
    grep "\[setup\]" $OUT/quick.log | cut -c1-400
    echo "all done at $(( $(date +%s) - T0 ))s"
    ;;
esac
