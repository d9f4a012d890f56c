#!/usr/bin/env bash
# Next device session, call 1 (~5 min): GPU tests of what session 3 built on the CPU only, then the
# ragged_linear and native-launch measurements. Calls 2-4: `TAG=aa1 bash .whl/runS3.sh partA`, `TAG=aa2 bash .whl/runS3.sh
# partA`, `bash .whl/runS3.sh partB` (A/A of AttentionKernels v3 and the full suite's time).
set -uo pipefail
export PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/benchmarks/test_timing.py \
  tests/ragged_kernels/test_linear.py "tests/pruners/test_model.py" -k "timer or warm or ragged_linear or linear" \
  2>&1 | tee $OUT/gpu-tests.log | tail -15
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/ragged_kernels/test_linear.py 2>&1 | tail -3
timeout 300 python3 scripts/bench_ragged_linear.py --batch 32 --sweep --models 2>&1 | tee $OUT/bench_ragged_linear.md
timeout 300 python3 scripts/bench_native_launch.py 2>&1 | tee $OUT/bench_native_launch.md
