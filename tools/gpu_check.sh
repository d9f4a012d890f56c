#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU and no network access.
#
# Uses the torch/triton already installed in `python3` (set PYTHON to pick another interpreter).
# Any other package it needs (e.g. sqlalchemy/asv for the service tests) comes as wheels from .whl/
# in the working tree (never committed; .gitignore lists it). Make them on a machine with network:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d .whl NAME==VERSION
# Runs the gpu-marked tests, then the short kernel benchmark table. Full logs go to $OUT if set.
#
#   OUT=/tmp/gpu-out bash tools/gpu_check.sh            # tests + kernel table
#   GPU_CHECK_STEPS="tests" bash tools/gpu_check.sh      # only the tests
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
STEPS=${GPU_CHECK_STEPS:-"tests kernels"}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

if compgen -G ".whl/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ragged-site \
        .whl/*.whl || { echo "wheel install failed" >&2; exit 2; }
    export PYTHONPATH="/tmp/ragged-site${PYTHONPATH:+:$PYTHONPATH}"
fi

"$PYTHON" - <<'PY' | tee "$OUT/env.txt"
import torch, triton
p = torch.cuda.get_device_properties(0)
print(f"gpu={p.name} sms={p.multi_processor_count} torch={torch.__version__} triton={triton.__version__} "
      f"cuda={torch.version.cuda}")
PY
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
    >>"$OUT/env.txt" 2>&1 || true

rc=0
for step in $STEPS; do
    case $step in
    tests)
        "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider tests/ragged_kernels tests/pruners 2>&1 \
            | tee "$OUT/gpu-tests.log" | tail -n 15
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1 ;;
    kernels)
        "$PYTHON" -m tools.bench_kernels ${BENCH_ARGS:-} --json "$OUT/bench_kernels.json" 2>&1 \
            | tee "$OUT/bench_kernels.md"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1 ;;
    *)
        echo "unknown step: $step" >&2; rc=2 ;;
    esac
done
echo "gpu_check: logs in $OUT (rc=$rc)"
exit $rc
