"""End-to-end throughput (images/s) per model x pruner x backend x batch, eager and graph mode.

Timing: every configuration is warmed up first (Triton compiles, cuDNN/cuBLAS heuristics, graph
capture), then each repeat synchronises, runs `iters` forwards back to back, synchronises again and
reads the host clock; the reported number is the median over repeats (host clocks only ever span
synchronised regions, so host dispatch cost is included, as it is for a real server).

Pruner settings target ~50 % fewer token-blocks than the dense model (`--budget 0.5`: mean over the
12 blocks of tokens kept / tokens in), and the measured token fraction is printed per row.

Usage (on a GPU machine):
    python -m pruners.bench_e2e --models deit_small_patch16_224 deit_base_patch16_224 --batches 1 4 64 256
Exit status: 0 ok, 2 no CUDA.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from pruners import BACKENDS, MODELS, PRUNERS, build_pruned_model, create_pruner, synthetic_images


def budget_options(pruner: str, budget: float, num_patches: int) -> dict:
    """Pruner options whose mean token fraction over 12 blocks (3 unpruned, then 3 stages) is ~budget.

    Args:
        pruner: pruner name.
        budget: target mean fraction of tokens per block (0.5 = "~50 % pruning").
        num_patches: N0 of the model.

    Returns:
        keyword options for create_pruner.
    """
    if pruner == "ats":
        # ATS blocks 3..11; random weights make nearly every sample unique, so ~num_samples stay:
        # (3 + 9 f) / 12 = budget  ->  f = (12 budget - 3) / 9 of N0.
        return {"num_samples": max(8, round(num_patches * (12 * budget - 3) / 9))}
    # DynamicViT / EViT / Threshold-L2 at blocks 3/6/9: (1 + r + r^2 + r^3) / 4 = budget, solved by bisection.
    lo, hi = 0.0, 1.0
    for _ in range(50):
        r = (lo + hi) / 2
        lo, hi = (r, hi) if (1 + r + r * r + r**3) / 4 < budget else (lo, r)
    r = round((lo + hi) / 2, 4)
    return {"dynamicvit": {"rho": r}, "evit": {"keep_rate": r}, "threshold_l2": {"keep_ratio": r}}[pruner]


def _time(fn, x: torch.Tensor, repeats: int, min_time: float) -> float:
    """Median seconds per call over `repeats`, each repeat >= min_time long (synchronised host clock)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(x)
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    iters = max(1, min(500, int(min_time / one)))
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


@torch.no_grad()
def bench_one(model_name, pruner_name, backend, mode, batch, budget, repeats, min_time, warmup, exact=False) -> dict:
    """Throughput of one configuration; returns a result row."""
    size = 384 if model_name.endswith("384") else 224
    n0 = (size // 16) ** 2
    pruner = create_pruner(pruner_name, **budget_options(pruner_name, budget, n0))
    opts = {"graph": mode == "graph", "exact_capacity": exact}
    model = build_pruned_model(model_name, pruner, backend, **opts).half().cuda()
    x = synthetic_images(batch, size, seed=1).half().cuda()
    frac = 1.0
    if backend != "dense":
        inner = model.model if mode == "graph" else model
        inner.record = True
        y = model(x)
        counts = [k.sum(1).float().mean().item() for k in inner.recorded_keeps]
        stages = list(inner.pruner.stages)
        per_block, n = [], 1 + n0
        for i in range(len(inner.backbone.blocks)):
            if i in stages:
                n = counts[stages.index(i)]
            per_block.append(n / (1 + n0))
        frac = sum(per_block) / len(per_block)
        inner.record = False
    for _ in range(warmup):
        y = model(x)
    del y
    sec = _time(model, x, repeats, min_time)
    del model
    torch.cuda.empty_cache()
    return dict(
        model=model_name,
        pruner=pruner_name,
        backend=backend,
        mode=mode + ("+exact" if exact else ""),
        batch=batch,
        img_per_s=batch / sec,
        ms=sec * 1e3,
        token_fraction=frac,
    )


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["deit_small_patch16_224", "deit_base_patch16_224"], choices=MODELS)
    ap.add_argument("--pruners", nargs="+", default=list(PRUNERS), choices=sorted(PRUNERS))
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 4, 64, 256])
    ap.add_argument("--budget", type=float, default=0.5, help="mean token fraction per block (0.5 = ~50%% pruning)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per repeat")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--exact-capacity", action="store_true", help="also time eager exact_capacity for ragged pruners")
    ap.add_argument("--json", help="write the rows to this file as JSON")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_e2e needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    print(f"{'model':24} {'pruner':13} {'backend':12} {'mode':12} {'batch':>5} {'img/s':>10} {'ms':>9} {'tokens':>6}")
    for model_name in args.models:
        for pruner_name in args.pruners:
            for batch in args.batches:
                configs = []
                for backend in args.backends:
                    configs.append((backend, "eager", False))
                    if backend == "triton":
                        configs.append((backend, "graph", False))
                    if args.exact_capacity and backend != "dense" and PRUNERS[pruner_name].ragged:
                        configs.append((backend, "eager", True))
                for backend, mode, exact in configs:
                    if backend == "dense" and pruner_name != args.pruners[0]:
                        continue  # the dense model does not depend on the pruner
                    try:
                        r = bench_one(
                            model_name,
                            pruner_name,
                            backend,
                            mode,
                            batch,
                            args.budget,
                            args.repeats,
                            args.min_time,
                            args.warmup,
                            exact,
                        )
                    except (RuntimeError, NotImplementedError) as e:  # e.g. out of memory, missing baseline
                        print(f"{model_name:24} {pruner_name:13} {backend:12} {mode:12} {batch:>5} skipped: {e}")
                        torch.cuda.empty_cache()
                        continue
                    rows.append(r)
                    print(
                        f"{r['model']:24} {r['pruner']:13} {r['backend']:12} {r['mode']:12} {r['batch']:>5} "
                        f"{r['img_per_s']:10.1f} {r['ms']:9.3f} {r['token_fraction']:6.3f}",
                        flush=True,
                    )
    _summary(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _summary(rows: list[dict]) -> None:
    """Speed-up of triton (graph at serving batches, best mode at large ones) over the eager baselines."""
    by = {(r["model"], r["pruner"], r["backend"], r["mode"], r["batch"]): r["img_per_s"] for r in rows}
    print("\nspeed-ups (triton vs eager fa2_varlen / padded_sdpa)")
    for (m, p, b, mode, bs), v in sorted(by.items()):
        if b != "triton" or mode != "graph":
            continue
        best = max(v, by.get((m, p, "triton", "eager", bs), 0.0))
        ours = v if bs <= 4 else best
        fa2, pad = by.get((m, p, "fa2_varlen", "eager", bs)), by.get((m, p, "padded_sdpa", "eager", bs))
        need = (3.0, 4.0) if bs <= 4 else (1.0, 1.0)
        parts = []
        for name, base, target in (("fa2", fa2, need[0]), ("padded", pad, need[1])):
            if base:
                parts.append(
                    f"{name} {ours / base:5.2f}x (target {target:.0f}x {'ok' if ours / base >= target else 'MISS'})"
                )
        print(f"{m:24} {p:13} batch {bs:>4}: " + ", ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
