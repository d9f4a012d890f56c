#!/usr/bin/env bash
# Session 6's last, short call: GPU tests and a B 64 reading of this session's unmeasured ATS / DynamicViT changes.
set -uo pipefail
export PYTHONUNBUFFERED=1 RAGGED_KERNELS_LAUNCH=python
T0=$(date +%s)
timeout 45 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners -k "ats or cls or dynamicvit" 2>&1 | tee $OUT/gpu-tests.log | tail -2
echo "tests done at $(( $(date +%s) - T0 ))s"
timeout 55 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners ats dynamicvit --batches 64 \
  --backends triton dense --repeats 5 --min-time 0.1 --time-box 40 2>&1 | tee $OUT/bench_e2e.md | grep -E "graph|dense  " | head -8
echo "all done at $(( $(date +%s) - T0 ))s"
