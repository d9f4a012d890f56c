#!/usr/bin/env bash
# Session 8 device calls; copy to .whl/ (every call carries [".whl"]):
#   bash .whl/runS13.sh verify   GPU tests of the pruners; check_grid of Threshold-L2 with the calibrated capacity
#                                (batch budget); profile; bench_e2e DeiT-B 224 B 64/256 (all pruners); TL2 B 64 re-read
#   bash .whl/runS13.sh grid     full check_grid; DeiT-B/384 Threshold-L2 calibrated B 64; serving B 1/4 (target 1)
#   bash .whl/runS13.sh full     the native entry point's GPU tests; the full issue-3 tables (batches 1/4/32/64/128)
#   bash .whl/runS13.sh final    DeiT-B/384 B 1/8/64 (issue 4 target 3); the quick asv subset (git bundle first)
#   bash .whl/runS13.sh kern     bucket 2 (register-capped config): ragged_kernels GPU tests; issue-3 --quick tables;
#                                bench_e2e DeiT-B 224 B 64/256; check_grid
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
stamp() { echo "$1 done at $(( $(date +%s) - T0 ))s"; }
case ${1:-verify} in
  verify)
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners 2>&1 | tee $OUT/gpu-tests.log | tail -4
    stamp tests
    timeout 120 python3 -m pruners.check_grid --pruners threshold_l2 --calibrated-capacity 2>&1 | grep -v Warn \
      | tee $OUT/check_grid_cap.md | tail -22
    stamp grid-cap
    timeout 60 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph --pruners threshold_l2 \
      2>&1 | grep -v Warn | tee $OUT/profile_pruned_forward.md | tail -12
    stamp profile
    timeout 130 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 \
      --time-box 110 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    stamp e2e
    for i in 1 2; do
      left=$(( 570 - ($(date +%s) - T0) )); [ $left -lt 50 ] && break
      timeout $(( left < 70 ? left : 70 )) python3 -m pruners.bench_e2e --models deit_base_patch16_224 \
        --pruners threshold_l2 --batches 64 256 --backends triton dense --calibrated-capacity --ragged-linear \
        --repeats 5 --min-time 0.1 --time-box 45 2>&1 | tee $OUT/bench_e2e_rlin_$i.md \
        | grep -E "^deit|threshold_l2 \| (64|256) \| yes"
      stamp rlin$i
    done
    ;;
  grid)
    timeout 280 python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -30
    stamp grid
    timeout 70 python3 -m pruners.bench_e2e --models deit_base_patch16_384 --pruners threshold_l2 --batches 64 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 --time-box 50 \
      2>&1 | tee $OUT/bench_e2e_384_thr.md | tail -6
    stamp 384
    left=$(( 570 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.bench_e2e --models deit_small_patch16_224 deit_base_patch16_224 --batches 1 4 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box $(( left - 25 )) 2>&1 \
      | tee $OUT/bench_e2e_s.md | tail -20
    stamp all
    ;;
  kern)
    timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ragged_kernels 2>&1 | tee $OUT/gpu-tests.log | tail -4
    stamp tests
    timeout 200 python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    sed -n '/## 2/,$p' $OUT/bench_kernels.md | head -60
    stamp quick
    timeout 90 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton dense --calibrated-capacity --repeats 5 --min-time 0.1 --time-box 75 2>&1 \
      | tee $OUT/bench_e2e_b.md | grep -E "^\| deit"
    stamp e2e
    left=$(( 575 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -3
    stamp all
    ;;
  full)
    timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ragged_kernels/test_native.py 2>&1 \
      | tee $OUT/gpu-tests.log | tail -3
    stamp tests
    left=$(( 570 - ($(date +%s) - T0) ))
    timeout $left python3 scripts/bench_kernels.py --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    sed -n '/## 2/,$p' $OUT/bench_kernels.md | head -100
    stamp all
    ;;
  final)
    timeout 200 python3 -m pruners.bench_e2e --models deit_base_patch16_384 --batches 1 8 64 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box 175 2>&1 \
      | tee $OUT/bench_e2e_384.md | tail -16
    stamp 384
    NO_TESTS=1 LIMIT=$(( 565 - ($(date +%s) - T0) )) bash .whl/runS3.sh quick
    grep "\[setup\]" $OUT/quick.log | cut -c1-300 | tail -5
    stamp all
    ;;
esac
