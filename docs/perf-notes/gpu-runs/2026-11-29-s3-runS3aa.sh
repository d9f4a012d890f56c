#!/usr/bin/env bash
# Session-3 device run 5: the kernel-sum GPU timer's test, then the A/A pair of the time_gpu classes.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pytest -q -m gpu -p no:cacheprovider tests/benchmarks/test_timing.py > $OUT/timer-test.log 2>&1
rc=$?; tail -4 $OUT/timer-test.log; [ $rc = 0 ] || { echo "timer test failed: stop"; exit 4; }
TAG=aa1 LIMIT=270 bash .whl/runS3.sh aa
TAG=aa2 LIMIT=270 bash .whl/runS3.sh aa
