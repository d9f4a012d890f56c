#!/usr/bin/env bash
# Next device session: GPU checks and measurements of what session 3 built on the CPU only.
#   bash .whl/runS4.sh linear   GPU tests (timer, warm-up, ragged_linear, model), bench_ragged_linear --sweep --models
#   bash .whl/runS4.sh native   bench_native_launch (builds the extension, bitwise check, host cost / latency)
# Then: `TAG=aa1 bash .whl/runS3.sh partA`, `TAG=aa2 bash .whl/runS3.sh partA`, `bash .whl/runS3.sh partB`
# (A/A of AttentionKernels v3 and the full suite's time). Each line is one device call (< 10 min).
set -uo pipefail
export PYTHONUNBUFFERED=1
case ${1:-linear} in
  linear)
    timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/benchmarks/test_timing.py \
      "tests/pruners/test_model.py" -k "timer or warm or ragged_linear" 2>&1 | tee $OUT/gpu-tests.log | tail -15
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/ragged_kernels/test_linear.py 2>&1 | tail -3
    timeout 300 python3 scripts/bench_ragged_linear.py --batch 32 --sweep --models 2>&1 | tee $OUT/bench_ragged_linear.md
    ;;
  native)
    timeout 500 python3 scripts/bench_native_launch.py 2>&1 | tee $OUT/bench_native_launch.md
    ;;
esac
