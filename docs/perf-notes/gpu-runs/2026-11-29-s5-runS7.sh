#!/usr/bin/env bash
# Session 5's last device call: GPU tests of the changed code, ATS sampler default, bench_e2e on replayed decisions, EndToEnd setup profile.
set -uo pipefail
export PYTHONUNBUFFERED=1
timeout 110 python3 -m pytest -q -p no:cacheprovider -m gpu tests/pruners -k "ats or bench_one or replay" 2>&1 | tee $OUT/gpu-tests.log | tail -3
timeout 80 python3 scripts/bench_ats_sampler.py --models 2>&1 | tee $OUT/bench_ats_sampler.md | tail -4
timeout 130 python3 -m pruners.bench_e2e --models deit_base_patch16_224 --pruners threshold_l2 ats --batches 64 256 \
  --backends triton fa2_varlen padded_sdpa dense --calibrated-capacity --ragged-linear --repeats 5 --min-time 0.1 \
  --time-box 100 2>&1 | tee $OUT/bench_e2e.md | tail -9
timeout 190 python3 .whl/time_e2e_setup.py 2>&1 | grep -v Warn | tee $OUT/e2e_setup.md | tail -42
