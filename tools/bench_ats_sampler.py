"""ATS's sampler: the op-by-op PyTorch port against the one-kernel Triton version. (GPU only.)

Prints (1) the sampler alone: GPU time per call (CUDA-graph replay of 20 calls, events) and host
cost (200 back-to-back calls before the sync) of `pruners.ats.ats_keep` and
`pruners.kernels.ats_sampling.ats_keep_fused` at DeiT geometries, the fused kernel with either target search
(comparison tiles, the default, or `search=True`'s binary search), with a check that all keep the same tokens;
(2) with `--models`, images/s of DeiT-B 224 (and DeiT-B 384 at the smaller batch) in graph mode with
the ATS pruner on each sampler, next to the dense model (same seeded weights and images; median of
30 synchronised replays, as the asv EndToEnd class).

Usage: python -m tools.bench_ats_sampler [--models] [--batch 32]
"""

from __future__ import annotations

import argparse
import sys

import torch

from pruners.ats import ats_keep
from pruners.kernels.ats_sampling import ats_keep_fused
from tools.bench_kernels import fmt_us, gpu_time, host_cost


def _row(batch: int, m: int, r: int) -> str:
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(8):
        scores = torch.rand(batch, m, device="cuda", generator=g) ** 3
        valid = torch.rand(batch, m, device="cuda", generator=g) < 0.9
        sets.append((scores, valid))
    same = all(torch.equal(ats_keep(s, v, r), ats_keep_fused(s, v, r)) for s, v in sets)
    same &= all(torch.equal(ats_keep(s, v, r), ats_keep_fused(s, v, r, search=True)) for s, v in sets)
    t_torch = gpu_time([lambda s=s, v=v: ats_keep(s, v, r) for s, v in sets])
    t_fused = gpu_time([lambda s=s, v=v: ats_keep_fused(s, v, r) for s, v in sets])
    t_search = gpu_time([lambda s=s, v=v: ats_keep_fused(s, v, r, search=True) for s, v in sets])
    first = sets[0]
    h_torch = host_cost(lambda: ats_keep(*first, r), n=50)
    h_fused = host_cost(lambda: ats_keep_fused(*first, r), n=50)
    return (f"| {batch} | {m} | {r} | {fmt_us(t_torch)} | {fmt_us(t_fused)} | {t_fused / t_torch:.2f} | "
            f"{fmt_us(t_search)} | {t_search / t_fused:.2f} | {fmt_us(h_torch)} | {fmt_us(h_fused)} | {same} |")


def sampler_table() -> None:
    print("| B | tokens M | samples R | torch GPU µs | fused GPU µs | fused / torch | fused, binary search GPU µs "
          "| search / tiles | torch host µs | fused host µs | same keep (both searches) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for batch, m, r in [(1, 196, 196), (32, 196, 196), (256, 196, 196), (32, 196, 120), (32, 576, 576)]:
        print(_row(batch, m, r), flush=True)


def models_table(batch: int) -> None:
    from benchmarks.model_runs import images_per_s_and_peak
    from pruners import build_pruned_model, create_pruner, synthetic_images

    for name, b in (("deit_base_patch16_224", batch), ("deit_base_patch16_384", max(1, batch // 4))):
        size = 384 if name.endswith("384") else 224
        images = synthetic_images(b, size, seed=0).half().cuda()

        def ips(model, images=images, b=b) -> float:
            with torch.no_grad():
                return images_per_s_and_peak(torch, lambda: model(images), b)[0]

        dense_model = build_pruned_model(name, None, "dense").half().cuda()
        dense = ips(dense_model)
        row = {}
        for sampler in ("torch", "fused"):
            model = build_pruned_model(name, create_pruner("ats", sampler=sampler), "triton", graph=True)
            row[sampler] = ips(model.half().cuda())
            del model
            torch.cuda.empty_cache()
        # Dense again, last: on 2026-11-29 the H200 read DeiT-B/224 B 32 dense at 4,689 images/s here, first
        # in the table, against 9,011 in bench_ragged_linear; the ratio uses the faster of the two readings.
        dense_last = ips(dense_model)
        best = max(dense, dense_last)
        print(f"| {name} | {b} | {dense:,.0f} / {dense_last:,.0f} | {row['torch']:,.0f} | {row['fused']:,.0f} | "
              f"{row['fused'] / row['torch']:.2f} | {row['fused'] / best:.2f} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", action="store_true", help="also DeiT-B graph-mode images/s per sampler")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_ats_sampler: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("## 1. The sampler alone (scores = rand^3, 90% valid)")
    sampler_table()
    if args.models:
        print("\n## 2. ATS (default: R = N0, blocks 3-11), graph mode, images/s")
        print("| model | B | dense first / last | ATS torch sampler | ATS fused sampler | fused / torch "
              "| fused / dense |")
        print("|---|---|---|---|---|---|---|")
        models_table(args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
