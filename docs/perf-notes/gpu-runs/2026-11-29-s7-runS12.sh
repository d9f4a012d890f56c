#!/usr/bin/env bash
# Session 7 device calls; copy to .whl/ (every call carries [".whl"]):
#   bash .whl/runS12.sh verify   GPU tests of pack + pruners; where the time goes (profile); bench_e2e DeiT-B 224 B 64/256
#   bash .whl/runS12.sh grid     check_grid (correctness gate) on this session's changes; DeiT-B/384 B 1/8/64 (target 3)
#   bash .whl/runS12.sh kernels  issue-3 tables (--quick) and the variant sweep
#   bash .whl/runS12.sh verify2  GPU tests, profile, bench_e2e B 64/256 (+rlin), then check_grid with the time left
#   bash .whl/runS12.sh verify3  as verify2 after the fused Threshold-L2 stage; DeiT-B/384 Threshold-L2 with calibrated capacity
#   bash .whl/runS12.sh final    the fixed GPU test; Threshold-L2 B 64 read again; the quick asv subset (git bundle first)
#   bash .whl/runS12.sh rln      ragged_layer_norm: its tests on the GPU; Threshold-L2 graph+rlin B 64/256 read twice
#   bash .whl/runS12.sh serve    DeiT-S/B B 1/4 (target 1), DeiT-B/384 B 1/8/64 (target 3), issue-3 tables
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
stamp() { echo "$1 done at $(( $(date +%s) - T0 ))s"; }
case ${1:-verify} in
  verify)
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners tests/ragged_kernels/test_pack.py 2>&1 \
      | tee $OUT/gpu-tests.log | tail -6
    stamp tests
    timeout 100 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph 2>&1 \
      | grep -v Warn | tee $OUT/profile_pruned_forward.md | tail -22
    stamp profile
    timeout 150 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 \
      --time-box 130 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    stamp e2e
    left=$(( 560 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 --batches 64 256 \
      --backends triton dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 --time-box $(( left - 20 )) \
      2>&1 | tee $OUT/bench_e2e_rlin.md | tail -6
    stamp all
    ;;
  grid)
    timeout 260 python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -30
    stamp grid
    left=$(( 560 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.bench_e2e --models deit_base_patch16_384 --batches 1 8 64 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box $(( left - 25 )) 2>&1 \
      | tee $OUT/bench_e2e_384.md | tail -16
    stamp all
    ;;
  kernels)
    timeout 200 python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    tail -60 $OUT/bench_kernels.md
    stamp quick
    left=$(( 560 - ($(date +%s) - T0) ))
    timeout $left python3 scripts/bench_kernels.py --variants --json $OUT/variants.json 2>&1 | tee $OUT/variants.md | cut -c1-400
    stamp all
    ;;
  verify2)
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners tests/ragged_kernels/test_pack.py 2>&1 \
      | tee $OUT/gpu-tests.log | tail -6
    stamp tests
    timeout 100 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph 2>&1 \
      | grep -v Warn | tee $OUT/profile_pruned_forward.md | tail -22
    stamp profile
    timeout 120 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 \
      --time-box 100 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    stamp e2e
    timeout 60 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 --batches 64 256 \
      --backends triton dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 --time-box 40 \
      2>&1 | tee $OUT/bench_e2e_rlin.md | tail -6
    stamp rlin
    left=$(( 575 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -30
    stamp all
    ;;
  verify3)
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners 2>&1 | tee $OUT/gpu-tests.log | tail -6
    stamp tests
    timeout 100 python3 scripts/profile_pruned_forward.py --batch 64 --calibrated-capacity --graph 2>&1 \
      | grep -v Warn | tee $OUT/profile_pruned_forward.md | tail -22
    stamp profile
    timeout 120 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 \
      --time-box 100 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    stamp e2e
    timeout 60 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 --batches 64 256 \
      --backends triton dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 --time-box 40 \
      2>&1 | tee $OUT/bench_e2e_rlin.md | tail -6
    stamp rlin
    timeout 60 python3 -m pruners.bench_e2e --models deit_base_patch16_384 --pruners threshold_l2 --batches 64 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --repeats 5 --min-time 0.1 --time-box 45 \
      2>&1 | tee $OUT/bench_e2e_384_thr.md | tail -6
    stamp 384
    left=$(( 575 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -8
    stamp all
    ;;
  final)
    timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners -k "threshold or ats_decide" 2>&1 \
      | tee $OUT/gpu-tests.log | tail -3
    stamp tests
    timeout 70 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 --batches 64 \
      --backends triton dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 --time-box 50 \
      2>&1 | tee $OUT/bench_e2e_rlin.md | tail -5
    stamp rlin
    NO_TESTS=1 LIMIT=$(( 570 - ($(date +%s) - T0) )) bash .whl/runS3.sh quick
    grep "\[setup\]" $OUT/quick.log | cut -c1-400
    stamp all
    ;;
  rln)
    timeout 90 python3 -m pytest -q -p no:cacheprovider tests/ragged_kernels/test_linear.py 2>&1 | tail -2
    timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners -k "ragged_linear or threshold" 2>&1 \
      | tee $OUT/gpu-tests.log | tail -2
    stamp tests
    for i in 1 2; do
      timeout 70 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 --batches 64 256 \
        --backends triton dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 --time-box 50 \
        2>&1 | tee $OUT/bench_e2e_rlin_$i.md | grep -E "^deit|threshold_l2 \| (64|256) \| yes"
      stamp rlin$i
    done
    ;;
  serve)
    timeout 130 python3 -m pruners.bench_e2e --models deit_small_patch16_224 deit_base_patch16_224 --batches 1 4 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box 110 2>&1 \
      | tee $OUT/bench_e2e_s.md | tail -20
    stamp serve
    timeout 200 python3 -m pruners.bench_e2e --models deit_base_patch16_384 --batches 1 8 64 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box 175 2>&1 \
      | tee $OUT/bench_e2e_384.md | tail -16
    stamp 384
    left=$(( 560 - ($(date +%s) - T0) ))
    timeout $left python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    tail -60 $OUT/bench_kernels.md
    stamp all
    ;;
esac
