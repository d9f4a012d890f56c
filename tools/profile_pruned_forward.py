"""Where a pruned forward's GPU time goes, by kernel category, next to the dense model. (GPU only.)

The end-to-end target 2c asks the pruned/dense speed-up to reach 0.85 of the FLOP ratio. At DeiT-B
B 64-256, the H200 first measured 0.61-0.83 depending on the pruner (2026-11-29; docs/performance.md
"End to end at large batches" has what closed it).
This script shows which kernels take the missing time. For the dense model and each pruner it runs
`--forwards` eager forwards under `torch.profiler` with CUDA activity and sums the device time of
every kernel per category (GEMM, attention, LayerNorm, GELU, pack, the ATS sampler, elementwise,
gather/scatter, reductions, sort/scan, copies, other). It prints µs per forward, kernels per
forward, and each category's pruned/dense ratio. Eager kernels take the same device time as
graph-mode replay; graph mode removes only the launch gaps. `--graph` also times a graph replay
(events) and prints the sum of kernel times next to it; the difference is idle GPU time.

Usage: python -m tools.profile_pruned_forward [--model deit_base_patch16_224] [--batch 64]
           [--pruners threshold_l2 dynamicvit evit ats] [--calibrated-capacity] [--graph] [--ops N]
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections import defaultdict

# First match wins: attention before GEMM (FlashAttention's kernels are GEMM-like), the library's own
# Triton kernels by name before the generic classes.
CATEGORIES: list[tuple[str, re.Pattern]] = [
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in [
        ("attention", r"flash|fmha|_ragged_attn|attention|efficient_attn"),
        ("pack", r"_pack_unpack|_segment_count"),
        # the pruners' fused decisions
        ("decision kernel", r"_ats_sample|_ats_keep|_ats_stage|_threshold_keep|_threshold_count"),
        ("cls probe", r"_cls_scores"),
        ("gemm", r"gemm|cutlass|xmma|cublas|_ragged_linear|matmul|wgmma|nvjet"),
        ("layernorm", r"layer_?norm"),  # ragged_layer_norm included
        ("gelu", r"gelu"),
        ("softmax", r"softmax"),
        ("sort/scan", r"sort|scan|cumsum"),
        ("gather/scatter", r"index|gather|scatter|take"),
        ("reduction", r"reduce"),
        ("copy/fill", r"copy|memcpy|memset|fill"),
        ("elementwise", r"elementwise|vectorized|unrolled"),
    ]
]


def category(kernel_name: str) -> str:
    """The category of a CUDA kernel name (see CATEGORIES); "other" when nothing matches."""
    for name, pattern in CATEGORIES:
        if pattern.search(kernel_name):
            return name
    return "other"


def summarize(kernels: list[tuple[str, float]], forwards: int) -> dict[str, tuple[float, float]]:
    """{category: (µs per forward, kernels per forward)} from (kernel name, device µs) pairs."""
    time_us: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for name, us in kernels:
        c = category(name)
        time_us[c] += us
        count[c] += 1
    return {c: (time_us[c] / forwards, count[c] / forwards) for c in time_us}


def table(columns: dict[str, dict[str, tuple[float, float]]], reference: str = "dense") -> list[str]:
    """Markdown rows: one per category (by the reference's time, largest first), then the totals."""
    names = list(columns)
    cats = sorted({c for col in columns.values() for c in col},
                  key=lambda c: -max(col.get(c, (0.0, 0.0))[0] for col in columns.values()))
    head = "| category | " + " | ".join(f"{n} µs (kernels)" for n in names) + " | " + " | ".join(
        f"{n} / {reference}" for n in names if n != reference) + " |"
    out = [head, "|---|" + "---|" * (2 * len(names) - (reference in names))]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b > 0 else "—"

    ref = columns.get(reference, {})
    for c in cats + ["total"]:
        cells, ratios = [], []
        for n in names:
            if c == "total":
                us, k = sum(v[0] for v in columns[n].values()), sum(v[1] for v in columns[n].values())
            else:
                us, k = columns[n].get(c, (0.0, 0.0))
            cells.append(f"{us:,.0f} ({k:.0f})")
            if n != reference:
                r_us = (sum(v[0] for v in ref.values()) if c == "total" else ref.get(c, (0.0, 0.0))[0])
                ratios.append(ratio(us, r_us))
        out.append(f"| {c} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return out


def _kernels(prof) -> list[tuple[str, float]]:
    """(name, device µs) of every CUDA kernel the profiler saw."""
    from torch.autograd import DeviceType

    out = []
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            us = getattr(e, "device_time", None)
            out.append((e.name, float(us if us is not None else e.cuda_time)))
    return out


def top_ops(prof, forwards: int, n: int) -> list[str]:
    """Markdown rows of the `n` (aten op, input shapes) pairs with the most self GPU time per forward."""
    rows = []
    for e in prof.key_averages(group_by_input_shape=True):
        us = getattr(e, "self_device_time_total", None)
        us = float(us if us is not None else e.self_cuda_time_total)
        if us > 0:
            rows.append((us / forwards, e.count / forwards, e.key, str(e.input_shapes)[:90]))
    rows.sort(key=lambda r: -r[0])
    total = sum(r[0] for r in rows)
    out = ["| op | input shapes | µs | calls | share |", "|---|---|---|---|---|"]
    out += [f"| {k} | {shapes} | {us:,.1f} | {c:g} | {us / total:.1%} |" for us, c, k, shapes in rows[:n]]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="deit_base_patch16_224")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--pruners", nargs="+", default=["threshold_l2", "dynamicvit", "evit", "ats"])
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--calibrated-capacity", action="store_true",
                    help="Threshold-L2 with max_keep='calibrate' (as bench_e2e --calibrated-capacity)")
    ap.add_argument("--ragged-linear", action="store_true")
    ap.add_argument("--forwards", type=int, default=10)
    ap.add_argument("--graph", action="store_true", help="also time a CUDA-graph replay per model (events)")
    ap.add_argument("--ops", type=int, default=0, metavar="N",
                    help="also list each model's N aten ops (with input shapes) that take the most GPU time")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("profile_pruned_forward: needs a CUDA GPU", file=sys.stderr)
        return 2
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.timing import warm_up
    from pruners import build_pruned_model, create_pruner, synthetic_images
    from tools.e2e_stats import budget_options, image_size

    size = image_size(args.model)
    x = synthetic_images(args.batch, size, seed=1).half().cuda()
    n0 = (size // 16) ** 2
    columns: dict[str, dict[str, tuple[float, float]]] = {}
    replay_us: dict[str, float] = {}
    op_tables: dict[str, list[str]] = {}
    for name in ["dense"] + list(args.pruners):
        if name == "dense":
            model = build_pruned_model(args.model, None, "dense")
        else:
            opts = budget_options(name, 0.5, n0)
            if args.calibrated_capacity and name == "threshold_l2":
                opts["max_keep"] = "calibrate"
            model = build_pruned_model(args.model, create_pruner(name, **opts), args.backend,
                                       ragged_linear=args.ragged_linear)
        model = model.half().cuda().eval()
        with torch.no_grad():
            warm_up(torch, functools.partial(model, x))
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=args.ops > 0) as prof:
                for _ in range(args.forwards):
                    model(x)
                torch.cuda.synchronize()
            columns[name] = summarize(_kernels(prof), args.forwards)
            if args.ops:
                op_tables[name] = top_ops(prof, args.forwards, args.ops)
            if args.graph:
                from pruners import GraphedPrunedModel

                run = GraphedPrunedModel(model) if name != "dense" else model
                warm_up(torch, functools.partial(run, x))
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.forwards):
                    run(x)
                end.record()
                torch.cuda.synchronize()
                replay_us[name] = start.elapsed_time(end) * 1e3 / args.forwards
        del model
        torch.cuda.empty_cache()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: {args.model} B {args.batch}, "
          f"backend {args.backend}, ~50% token budget, {args.forwards} eager forwards profiled\n")
    print("\n".join(table(columns)))
    if replay_us:
        print("\n| model | sum of kernels µs | replay µs (dense: eager) | idle share |\n|---|---|---|---|")
        for name, us in replay_us.items():
            busy = sum(v[0] for v in columns[name].values())
            print(f"| {name} | {busy:,.0f} | {us:,.0f} | {max(0.0, 1 - busy / us):.0%} |")
    for name, rows in op_tables.items():
        print(f"\n### {name}: top {args.ops} aten ops by GPU time (self), per forward\n")
        print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
