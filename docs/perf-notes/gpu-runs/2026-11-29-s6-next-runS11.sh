#!/usr/bin/env bash
# Next device session (session 7), one call per line; copy to .whl/ and rebuild .whl/repo.bundle first
# (git bundle create .whl/repo.bundle main); every call carries [".whl"]:
#   bash .whl/runS3.sh partB ; TAG=partA bash .whl/runS3.sh partA     the full suite re-timed; the runner's [setup] lines
#                                                                       name what makes AttentionKernels' setup 214-358 s
#   bash .whl/runS11.sh kernels    variant sweep (2-stage, wider tails), the issue-3 tables, GPU tests
#   bash .whl/runS11.sh models     check_grid on session 6's run-5 changes; bench_e2e DeiT-B 224 B 64/256 and DeiT-B/384 B 1-64
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
case ${1:-kernels} in
  kernels)
    timeout 150 python3 scripts/bench_kernels.py --variants --json $OUT/variants.json 2>&1 | tee $OUT/variants.md | cut -c1-400
    timeout 200 python3 scripts/bench_kernels.py --quick --json $OUT/bench_kernels.json > $OUT/bench_kernels.md 2>&1
    tail -60 $OUT/bench_kernels.md
    timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ragged_kernels tests/pruners tests/benchmarks 2>&1 \
      | tee $OUT/gpu-tests.log | tail -3
    ;;
  models)
    timeout 200 python3 -m pruners.check_grid 2>&1 | grep -v Warn | tee $OUT/check_grid.md | tail -8
    timeout 150 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --batches 64 256 \
      --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 \
      --time-box 120 2>&1 | tee $OUT/bench_e2e_b.md | tail -12
    left=$(( 570 - ($(date +%s) - T0) ))
    timeout $left python3 -m pruners.bench_e2e --models deit_base_patch16_384 --batches 1 8 64 \
      --backends triton fa2_varlen padded_sdpa dense --repeats 5 --min-time 0.1 --time-box $(( left - 25 )) 2>&1 \
      | tee $OUT/bench_e2e_384.md | tail -16
    ;;
esac
echo "done at $(( $(date +%s) - T0 ))s"
