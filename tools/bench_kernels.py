"""Kernel benchmark table (run on a CUDA machine; the tables of docs/performance.md "Kernel GPU time"
come from it): our Triton ragged attention against
FlashAttention-2 varlen and the other baselines, side by side in one run, reported as ratios.

Measures (DeiT-B geometry, 12 heads x 64, fp16 unless said):
  host   wall time of N back-to-back calls taken *before* the final synchronize, / N
  lat    one call + synchronize, wall clock, median
  gpu    CUDA-graph replay of CALLS calls rotating over input sets larger than L2, CUDA events, / CALLS
  pack   pack + unpack at B=64, C=768 against a plain device copy of the same bytes (graph replay)

Usage:  python -m tools.bench_kernels [--sweep | --only-sweep | --variants | --flex | --structural] [--quick]
            [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from tools.bench_kernels_measure import (
    L2_BYTES,
    bound_calls,
    flex_calls,
    flops,
    fmt_us,
    gpu_points,
    gpu_time,
    host_cost,
    impls,
    latency,
    lengths_for,
    make_inputs,
    n_sets,
    set_head_dim,
)
from tools.bench_kernels_sweeps import SWEEP_POINTS, VARIANT_POINTS, structural, sweep, variant_sweep, variants
from tools.bench_kernels_tables import (
    table_flex,
    table_gpu,
    table_host,
    table_host_breakdown,
    table_large,
    table_latency,
    table_pack,
)

# The measuring functions stay importable from here (other GPU tools time with them).
__all__ = [
    "L2_BYTES", "SWEEP_POINTS", "VARIANT_POINTS", "bound_calls", "flex_calls", "flops", "fmt_us", "gpu_points",
    "gpu_time", "host_cost", "impls", "latency", "lengths_for", "main", "make_inputs", "n_sets", "structural",
    "sweep", "table_flex", "table_gpu", "table_host", "table_host_breakdown", "table_large", "table_latency",
    "table_pack", "variant_sweep", "variants",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", action="store_true", help="also sweep kernel configs")
    ap.add_argument("--only-sweep", action="store_true")
    ap.add_argument("--variants", action="store_true",
                    help="only the kernel-variant sweep (tail width, K layout) on its own uniform points")
    ap.add_argument("--head-dim", type=int, choices=(32, 64, 128), default=64,
                    help="with --variants: the head dim swept, at DeiT-B's width (768 / head dim heads)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--flex", action="store_true", help="only the FlexAttention table (6), beside triton and FA2")
    ap.add_argument("--structural", action="store_true",
                    help="only the structural variants (tools/attention_variants.py) against the shipping kernel")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.head_dim != 64 and not args.variants:
        ap.error("--head-dim applies to --variants only (the kernel tables are at 12 heads x 64)")
    set_head_dim(args.head_dim)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    p = torch.cuda.get_device_properties(0)
    from ragged_kernels import launch_path

    launch = launch_path()
    print(f"# {p.name}, torch {torch.__version__}, triton {__import__('triton').__version__}, "
          f"SMs {p.multi_processor_count}, ragged_attention launch path: {launch}")
    rows: list = []
    if args.flex:
        table_flex(rows, args.quick)
    elif args.structural:
        structural(rows, args.quick)
    elif args.variants:
        variant_sweep(rows)
    elif not args.only_sweep:
        table_host(rows, args.quick)
        table_host_breakdown(rows)
        table_latency(rows, args.quick)
        table_gpu(rows, args.quick)
        table_large(rows)
        table_pack(rows)
    if args.sweep or args.only_sweep:
        sweep(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
