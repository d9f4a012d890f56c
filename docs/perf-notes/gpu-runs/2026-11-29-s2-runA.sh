#!/usr/bin/env bash
# Device run A (2026-11-29 session 2): GPU tests, kernel table with the direct launch A/B, asv-class diag.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)
el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
el start; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
el tests
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/ragged_kernels 2>&1 | tee $OUT/gpu-tests.log | tail -n 6
el "process overhead"
for i in 1 2; do /usr/bin/time -f "%e s: import torch + cuda init" python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; done
/usr/bin/time -f "%e s: one AttentionKernelsPR case in a fresh process (setup + 1 sample)" python3 -c "
from benchmarks import bench_attention as b
c=b.AttentionKernelsPR(); c.setup('deitb224-b8-keep0.5','triton'); c.time_gpu('deitb224-b8-keep0.5','triton')"
el kernels
timeout 330 python3 scripts/bench_kernels.py --json $OUT/bench_kernels.json 2>&1 | tee $OUT/bench_kernels.md | grep -v "^|.*|.*|.*|.*|.*|.*|.*|.*|" | tail -n 5
el diag
timeout 100 python3 -m benchmarks.diag --class AttentionKernels --samples 3 2>&1 | tee $OUT/diag.md | tail -n 50
el end
