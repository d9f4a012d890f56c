"""Where `bench_end_to_end.EndToEnd.setup_cache`'s time goes: model builds vs timed cases. (GPU only.)

Runs the full EndToEnd matrix outside asv with `model_runs.build_model` and `model_runs.guarded` wrapped in
timers, then prints the split, the slowest builds and cases, and the first cases in run order (where
a first-configuration effect would show). H200, 2026-11-29: 105 s = 51 builds 37 s + 102 cases 63 s.

Usage: python -m tools.profile_end_to_end_setup
"""

from __future__ import annotations

import sys
import time

from benchmarks import bench_end_to_end as e2e
from benchmarks import model_runs


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("profile_end_to_end_setup: needs a CUDA GPU", file=sys.stderr)
        return 2
    rows: list[tuple] = []  # (kind, label, seconds, images/s or None)
    build, guarded = model_runs.build_model, model_runs.guarded

    def timed_build(torch, model, pruner, backend, dtype):
        t0 = time.perf_counter()
        try:
            return build(torch, model, pruner, backend, dtype)
        finally:
            rows.append(("build", f"{model} {pruner} {backend}", time.perf_counter() - t0, None))

    def timed_case(results, key, compute):
        t0 = time.perf_counter()
        guarded(results, key, compute)
        rows.append(("case", key, time.perf_counter() - t0, results[key].get("values", {}).get("images_per_s")))

    model_runs.build_model, model_runs.guarded = timed_build, timed_case
    try:
        t0 = time.perf_counter()
        e2e.measure_matrix(*e2e.EndToEnd.params)
        total = time.perf_counter() - t0
    finally:
        model_runs.build_model, model_runs.guarded = build, guarded
    builds = [r for r in rows if r[0] == "build"]
    cases = [r for r in rows if r[0] == "case"]
    b, c = sum(r[2] for r in builds), sum(r[2] for r in cases)
    print(f"total {total:.1f} s: builds {b:.1f} s ({len(builds)}), cases {c:.1f} s ({len(cases)}), "
          f"rest {total - b - c:.1f} s\n")
    print("slowest 25:")
    for kind, label, sec, ips in sorted(rows, key=lambda r: -r[2])[:25]:
        print(f"{kind:5} {sec:6.2f} s  {label}" + (f"  {ips:,.0f} img/s" if ips else ""))
    print("\nfirst 12 cases in run order:")
    for _, label, sec, ips in cases[:12]:
        print(f"{sec:6.2f} s  {label}  {ips or 0:,.0f} img/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
