"""Where a GPU benchmark class spends its time, outside asv: per (preset, backend) the setup and N
samples of each measure, timed with a host clock. For finding why a class overruns its budget
(the 45-case AttentionKernels did not finish one round in 240 s on the H200, 2026-11-29).

Usage (on a CUDA machine):  python -m benchmarks.diag [--class AttentionKernels] [--samples 10]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--class", dest="cls", default="AttentionKernels", help="class in benchmarks.bench_attention")
    ap.add_argument("--samples", type=int, default=10)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from benchmarks import bench_attention

    cls = getattr(bench_attention, args.cls)
    measures = [m for m in ("time_gpu", "time_host", "time_latency") if hasattr(cls, m)]
    print(f"| preset | backend | setup s | {' | '.join(f'{m} x{args.samples} s' for m in measures)} | error |")
    print("|---|---|---|" + "---|" * (len(measures) + 1))
    for params in itertools.product(*cls.params):
        bench = cls()
        row, err = [], ""
        t0 = time.perf_counter()
        try:
            bench.setup(*params)
            row.append(time.perf_counter() - t0)
            for m in measures:
                t1 = time.perf_counter()
                for _ in range(args.samples):
                    bench.setup(*params)
                    getattr(bench, m)(*params)
                torch.cuda.synchronize()
                row.append(time.perf_counter() - t1)
        except NotImplementedError as exc:
            err = f"skip: {exc}"
        except Exception as exc:  # report and go on: the point is to see every case
            err = f"{type(exc).__name__}: {str(exc)[:120]}"
        cells = " | ".join(f"{x:.2f}" for x in row) + " | " * (len(measures) + 1 - len(row))
        print(f"| {' | '.join(map(str, params))} | {cells} {err} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
