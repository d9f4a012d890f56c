"""Is a Triton GEMM over the kept rows faster than cuBLAS over the whole capacity? (GPU only.)

For DeiT-B's four linear layers (qkv 768->2304, proj 768->768, fc1 768->3072 + GELU, fc2 3072->768)
at B x 197 capacity rows, prints GPU time (CUDA-graph replay of 20 calls, events) of
`torch.nn.functional.linear` on all rows (what the packed graph-mode forward runs today) against
`ragged_kernels.linear.ragged_linear` at kept fractions 1.0 / 0.7 / 0.5 / 0.3, and checks its kept
rows against torch. Output: a markdown table; ratios < 1 mean the ragged GEMM is faster.

With `--models`, also the end-to-end question: images/s of DeiT-B 224 in graph mode (triton backend)
for each pruner, with the linear layers on cuBLAS (all capacity rows) and with `ragged_linear=True`,
next to the dense model (same seeded weights and images; median of 30 synchronised replays).

With `--sweep`, also the GPU time of a few tile configs per layer at kept 0.5 (the default tiles
are an unswept guess).

With `--epilogue`, also fc1 + GELU of DeiT-S and DeiT-B at B x 99 and B x 197 rows: cuBLAS then
exact GELU (two kernels, what timm runs), cuBLAS then tanh GELU, and cuBLASLt's GELU epilogue
(`torch._addmm_activation`, tanh GELU inside the GEMM: one kernel, no round trip of the 4x-wide
intermediate), with each path's largest difference from exact GELU in fp32.

Usage: python -m tools.bench_ragged_linear [--batch 32] [--sweep] [--models] [--epilogue]
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from ragged_kernels.linear import ragged_linear
from tools.bench_kernels import gpu_time  # graph replay of 20 calls, events, median

LAYERS = {
    "qkv": (768, 2304, False),
    "proj": (768, 768, False),
    "fc1+gelu": (768, 3072, True),
    "fc2": (3072, 768, False),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--models", action="store_true", help="also the pruned DeiT-B end to end")
    ap.add_argument("--sweep", action="store_true", help="also sweep tile configs at kept 0.5 per layer")
    ap.add_argument("--epilogue", action="store_true", help="also fc1 + GELU: cuBLAS + GELU vs cuBLASLt's epilogue")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_ragged_linear: needs a CUDA GPU (this measures GPU time)", file=sys.stderr)
        return 2
    rows = args.batch * 197
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, capacity {rows} rows (B={args.batch} x 197)")
    print("| layer | cuBLAS all rows | kept 1.0 | kept 0.7 | kept 0.5 | kept 0.3 | ratio at 0.5 | max err |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (k, n, gelu) in LAYERS.items():
        x = torch.randn(rows, k, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16) / k**0.5
        b = torch.randn(n, device="cuda", dtype=torch.float16)
        out = torch.empty(rows, n, device="cuda", dtype=torch.float16)

        def dense(x=x, w=w, b=b, gelu=gelu):
            y = F.linear(x, w, b)
            return F.gelu(y) if gelu else y

        t_dense = gpu_time([dense])
        cells, err = [], 0.0
        for frac in (1.0, 0.7, 0.5, 0.3):
            total = int(rows * frac)
            cu = torch.tensor([0, total], dtype=torch.int32, device="cuda")
            t = gpu_time([lambda cu=cu, x=x, w=w, b=b, g=gelu, o=out: ragged_linear(x, w, b, cu, gelu=g, out=o)])
            ref = dense()
            err = max(err, (out[:total].float() - ref[:total].float()).abs().max().item())
            cells.append(t)
        print(f"| {name} | {t_dense * 1e6:.1f} µs | " + " | ".join(f"{t * 1e6:.1f} µs" for t in cells)
              + f" | {cells[2] / t_dense:.2f} | {err:.3g} |")  # fmt: skip
    if args.sweep:
        sweep_table(rows)
    if args.epilogue:
        epilogue_table(args.batch)
    if args.models:
        models_table(args.batch)
    return 0


SWEEP = [
    (128, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 256, 64, 8, 3),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 64, 64, 4, 4),
    (128, 128, 32, 4, 4),
]


def sweep_table(rows: int) -> None:
    """GPU time per tile config at kept 0.5, per layer, against cuBLAS on all rows."""
    print(f"\n# sweep at kept 0.5 ({rows // 2} of {rows} rows): µs per config, best first; cuBLAS on all rows")
    for name, (k, n, gelu) in LAYERS.items():
        x = torch.randn(rows, k, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16) / k**0.5
        b = torch.randn(n, device="cuda", dtype=torch.float16)
        out = torch.empty(rows, n, device="cuda", dtype=torch.float16)
        cu = torch.tensor([0, rows // 2], dtype=torch.int32, device="cuda")
        t_dense = gpu_time([lambda x=x, w=w, b=b: F.linear(x, w, b)])
        res = []
        for cfg in SWEEP:
            try:
                args = (x, w, b, cu)
                t = gpu_time([lambda cfg=cfg, a=args, g=gelu, o=out: ragged_linear(*a, gelu=g, out=o, blocks=cfg)])
                res.append((t, cfg))
            except Exception as exc:  # noqa: BLE001 - a config that does not compile here: say so, go on
                print(f"<!-- {name} {cfg}: {exc!r} -->")
        res.sort()
        cells = ", ".join(f"{cfg}: {t * 1e6:.1f}" for t, cfg in res)
        print(f"- {name}: cuBLAS {t_dense * 1e6:.1f} µs; {cells}")


def epilogue_table(batch: int) -> None:
    """fc1 + GELU per model and row count: two kernels (exact or tanh GELU) against cuBLASLt's epilogue."""
    print(f"\n# fc1 + GELU, B={batch}: GPU time (µs) and largest |difference| from fp32 exact GELU")
    print("| model | rows | linear + exact GELU | linear + tanh GELU | cuBLASLt GELU epilogue | epilogue / exact "
          "| max diff exact | max diff epilogue |")
    print("|---|---|---|---|---|---|---|---|")
    for model, (k, n) in {"DeiT-S": (384, 1536), "DeiT-B": (768, 3072)}.items():
        for tokens in (99, 197):
            rows = batch * tokens
            xs = [torch.randn(rows, k, device="cuda", dtype=torch.float16) for _ in range(3)]
            w = torch.randn(n, k, device="cuda", dtype=torch.float16) / k**0.5
            b = torch.randn(n, device="cuda", dtype=torch.float16)
            paths = {
                "exact": lambda x, w=w, b=b: F.gelu(F.linear(x, w, b)),
                "tanh": lambda x, w=w, b=b: F.gelu(F.linear(x, w, b), approximate="tanh"),
                "epilogue": lambda x, w=w, b=b: torch._addmm_activation(b, x, w.t(), use_gelu=True),
            }
            times = {name: gpu_time([lambda f=f, x=x: f(x) for x in xs]) for name, f in paths.items()}
            ref = F.gelu(F.linear(xs[0].float(), w.float(), b.float()))
            diff = {name: (paths[name](xs[0]).float() - ref).abs().max().item() for name in ("exact", "epilogue")}
            print(f"| {model} | {rows} | {times['exact'] * 1e6:.1f} | {times['tanh'] * 1e6:.1f} | "
                  f"{times['epilogue'] * 1e6:.1f} | {times['epilogue'] / times['exact']:.2f} | "
                  f"{diff['exact']:.3g} | {diff['epilogue']:.3g} |")


def models_table(batch: int) -> None:
    """images/s of DeiT-B 224 graph mode per pruner: cuBLAS linears vs ragged_linear, and dense."""
    from benchmarks.model_runs import images_per_s_and_peak
    from pruners import build_pruned_model, synthetic_images

    images = synthetic_images(batch, 224, seed=0).half().cuda()

    def ips(model) -> float:  # batch / median of 30 synchronised forwards, as the asv EndToEnd class
        with torch.no_grad():
            return images_per_s_and_peak(torch, lambda: model(images), batch)[0]

    name = "deit_base_patch16_224"
    dense = ips(build_pruned_model(name, None, "dense").half().cuda())
    print(f"\n# DeiT-B 224, B={batch}, graph mode, images/s (dense: {dense:,.0f})")
    print("| pruner | cuBLAS linears | ragged_linear | ragged / cuBLAS | ragged / dense |")
    print("|---|---|---|---|---|")
    for pruner in ("threshold_l2", "ats", "dynamicvit", "evit"):
        base = ips(build_pruned_model(name, pruner, "triton", graph=True).half().cuda())
        fast = ips(build_pruned_model(name, pruner, "triton", graph=True, ragged_linear=True).half().cuda())
        print(f"| {pruner} | {base:,.0f} | {fast:,.0f} | {fast / base:.2f} | {fast / dense:.2f} |")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    raise SystemExit(main())
