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
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.timing import synced_calls
from ragged_kernels import (
    fa2_varlen_attention,
    flex_attention_varlen,
    pack_tokens,
    padded_sdpa_attention,
    ragged_attention,
    unpack_tokens,
    varlen_attn_attention,
)
from ragged_kernels.attention import fwd
from ragged_kernels.attention.fwd import CONFIGS, AttnConfig, default_scale, ragged_attn_fwd

HEADS, DIM = 12, 64
L2_BYTES = 60 * 2**20


def lengths_for(batch: int, tokens: int, cap: int, ragged: bool, seed: int = 0) -> list[int]:
    if not ragged:
        return [tokens] * batch
    g = torch.Generator().manual_seed(seed)
    lo, hi = max(1, round(tokens * 0.7)), min(cap, round(tokens * 1.3))
    return torch.randint(lo, hi + 1, (batch,), generator=g).tolist()


def make_inputs(lengths: list[int], sets: int, dtype=torch.float16):
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    total = max(1, sum(lengths))
    out = []
    for _ in range(sets):
        qkv = torch.randn(total, 3, HEADS, DIM, dtype=dtype, device="cuda")
        out.append(qkv.unbind(1))
    return cu, out


def n_sets(lengths: list[int]) -> int:
    per_set = max(1, sum(lengths)) * 3 * HEADS * DIM * 2 * 2  # qkv + out, fp16
    return max(2, min(64, math.ceil(2.5 * L2_BYTES / per_set)))


def host_cost(fn, n: int = 200, reps: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        samples.append((t1 - t0) / n)
    return statistics.median(samples)


def latency(fn, n: int = 200) -> float:
    fn()
    return statistics.median(synced_calls(torch, fn, n))


def gpu_time(fns: list, calls: int = 20, reps: int = 20) -> float:
    """Seconds per call on the GPU: one graph of `calls` calls cycling over `fns` (distinct inputs)."""
    for f in fns[: min(len(fns), 3)]:
        f()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in fns[:2]:
            f()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fns[i % len(fns)]()
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) / 1e3 / calls)
    return statistics.median(samples)


def impls(cap: int):
    return {
        # Host cost and latency: every implementation allocates its output, as FA2 does.
        "triton": lambda q, k, v, cu, out: ragged_attention(q, k, v, cu, cap),
        "triton_out": lambda q, k, v, cu, out: ragged_attention(q, k, v, cu, cap, out=out),
        "fa2": lambda q, k, v, cu, out: fa2_varlen_attention(q, k, v, cu, cap),
        "padded_sdpa": lambda q, k, v, cu, out: padded_sdpa_attention(q, k, v, cu, cap),
        "varlen_attn": lambda q, k, v, cu, out: varlen_attn_attention(q, k, v, cu, cap),
        # FlexAttention with its document mask built in the call (what a ragged batch costs a user)
        "flex": lambda q, k, v, cu, out: flex_attention_varlen(q, k, v, cu, cap),
    }


def bound_calls(name: str, cap: int, cu, sets):
    f = impls(cap)[name]
    outs = [torch.empty_like(s[0]) for s in sets]
    return [lambda s=s, o=o: f(*s, cu, o) for s, o in zip(sets, outs, strict=True)]


def fmt_us(x: float) -> str:
    return f"{x * 1e6:7.1f}"


def table_host(rows: list, quick: bool):
    print("\n## 1. Host cost per call (µs, N=200 back-to-back, before sync), N=197 capacity")
    print("(every call allocates its output, as FA2 does)")
    print("| batch | keep | triton | fa2 | padded_sdpa | varlen_attn | triton/fa2 |")
    print("|---|---|---|---|---|---|---|")
    for batch in (1, 4, 32):
        for keep in (1.0, 0.5, 0.2):
            lengths = lengths_for(batch, max(1, round(197 * keep)), 197, ragged=keep < 1)
            cu, sets = make_inputs(lengths, 1)
            r = {}
            for name in ("triton", "fa2", "padded_sdpa", "varlen_attn"):
                try:
                    r[name] = host_cost(bound_calls(name, 197, cu, sets)[0], n=100 if quick else 200)
                except Exception as exc:  # a baseline missing on this torch: report, don't hide
                    r[name] = float("nan")
                    print(f"<!-- {name} failed: {exc!r} -->")
            rows.append({"measure": "host", "batch": batch, "keep": keep, **r})
            print(f"| {batch} | {keep} | {fmt_us(r['triton'])} | {fmt_us(r['fa2'])} | {fmt_us(r['padded_sdpa'])} | "
                  f"{fmt_us(r['varlen_attn'])} | {r['triton'] / r['fa2']:.2f} |")


def table_host_breakdown(rows: list):
    """Where the host time of one ragged_attention call goes (B=4, keep 0.5)."""
    lengths = lengths_for(4, 98, 197, ragged=True)
    cu, sets = make_inputs(lengths, 1)
    q, k, v = sets[0]
    out = torch.empty_like(q)
    ragged_attention(q, k, v, cu, 197, out=out)
    launch = fwd.compiled_launches()[0]
    ck, function, metadata, consts = launch.kernel, launch.function, launch.metadata, launch.constexprs
    ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), cu.data_ptr())
    grid_m = 197 // 64 + 1
    stream = torch._C._cuda_getCurrentRawStream(0)
    parts = {
        "CompiledKernel.run only": lambda: ck.run(grid_m, 4 * HEADS, 1, stream, function, metadata, None, None, None,
                                                  *ptrs, q.shape[0], 0.18, *consts),
        "torch.empty (output)": lambda: torch.empty(q.shape, dtype=q.dtype, device="cuda"),
        "torch.empty_like(q, contiguous)": lambda: torch.empty_like(q, memory_format=torch.contiguous_format),
        "ragged_attn_fwd (no checks, out given)": lambda: fwd.ragged_attn_fwd(q, k, v, cu, 197, 0.125, out),
        "ragged_attention (out given)": lambda: ragged_attention(q, k, v, cu, 197, out=out),
        "ragged_attention": lambda: ragged_attention(q, k, v, cu, 197),
        "fa2_varlen_attention": lambda: fa2_varlen_attention(q, k, v, cu, 197),
    }
    print("\n## 1b. Host cost breakdown (µs per call, B=4, keep ~0.5)")
    print("| part | µs |")
    print("|---|---|")
    for name, fn in parts.items():
        t = host_cost(fn, n=500)
        rows.append({"measure": "host_breakdown", "part": name, "seconds": t})
        print(f"| {name} | {fmt_us(t)} |")


def table_latency(rows: list, quick: bool):
    print("\n## 2. Latency, call + synchronize (µs, median), 80% pruning (keep 0.2), N=197 capacity")
    print("| batch | triton | fa2 | padded_sdpa | triton/fa2 |")
    print("|---|---|---|---|---|")
    for batch in (1, 2, 4, 8, 16, 32):
        lengths = lengths_for(batch, round(197 * 0.2), 197, ragged=True)
        cu, sets = make_inputs(lengths, 1)
        r = {name: latency(bound_calls(name, 197, cu, sets)[0], n=100 if quick else 300)
             for name in ("triton", "fa2", "padded_sdpa")}
        rows.append({"measure": "latency", "batch": batch, "keep": 0.2, **r})
        print(f"| {batch} | {fmt_us(r['triton'])} | {fmt_us(r['fa2'])} | {fmt_us(r['padded_sdpa'])} | "
              f"{r['triton'] / r['fa2']:.2f} |")


def gpu_points(quick: bool):
    batches = (1, 4, 32, 64, 128) if not quick else (1, 32, 128)
    for batch in batches:
        for tokens in (40, 99, 197):
            for ragged in (False, True):
                yield batch, tokens, 197, ragged
    for batch in batches:
        for tokens in (288, 577):
            for ragged in (False, True):
                yield batch, tokens, 577, ragged


def flops(lengths: list[int]) -> float:
    return sum(4.0 * n * n * DIM * HEADS for n in lengths)


def flex_calls(cap: int, cu, sets) -> list:
    """FlexAttention calls with the block mask built once (attention only: the stronger competitor;
    the mask's own cost is in `table_flex`)."""
    from ragged_kernels.baselines import flex_block_mask

    mask = flex_block_mask(cu, sets[0][0].shape[0])
    return [lambda s=s: flex_attention_varlen(*s, cu, cap, block_mask=mask) for s in sets]


def table_flex(rows: list, quick: bool):
    """FlexAttention beside our kernel and FA2 on the GPU grid: GPU time (graph replay, mask prebuilt),
    the mask build's GPU time, host cost per call with the mask built in it, and compile time."""
    from ragged_kernels.baselines import flex_block_mask

    print("\n## 6. FlexAttention (document mask from cu_seqlens, torch.compile), GPU time per call (µs, graph replay)")
    print("| batch | tokens/cap | lengths | triton | fa2 | flex | flex mask build | triton/flex | first call s |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for batch, tokens, cap, ragged in gpu_points(quick):
        lengths = lengths_for(batch, tokens, cap, ragged)
        cu, sets = make_inputs(lengths, n_sets(lengths))
        t0 = time.perf_counter()
        flex_calls(cap, cu, sets)[0]()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        t_tri = gpu_time(bound_calls("triton_out", cap, cu, sets))
        t_fa2 = gpu_time(bound_calls("fa2", cap, cu, sets))
        t_flex = gpu_time(flex_calls(cap, cu, sets))
        try:
            t_mask = gpu_time([lambda cu=cu, rows=sets[0][0].shape[0]: flex_block_mask(cu, rows)])
        except Exception as exc:  # noqa: BLE001 - a mask build that cannot be captured: say so
            t_mask = float("nan")
            from benchmarks.timing import restore_rng_after_failed_capture

            restore_rng_after_failed_capture(torch)
            print(f"<!-- mask build not capturable: {type(exc).__name__}: {str(exc)[:120]} -->")
        ratios.append(t_tri / t_flex)
        rows.append({"measure": "flex", "batch": batch, "tokens": tokens, "cap": cap, "ragged": ragged,
                     "triton": t_tri, "fa2": t_fa2, "flex": t_flex, "flex_mask": t_mask, "first_call_s": first})
        print(f"| {batch} | {tokens}/{cap} | {'±30%' if ragged else 'uniform'} | {fmt_us(t_tri)} | {fmt_us(t_fa2)} | "
              f"{fmt_us(t_flex)} | {fmt_us(t_mask)} | {t_tri / t_flex:.2f} | {first:.1f} |", flush=True)
        del sets
    print(f"\nworst triton/flex = {max(ratios):.2f} (target <= 0.8 at every point)")
    print("\n### FlexAttention host cost per call (µs, N=200 back-to-back, before sync), mask built in the call")
    print("| batch | keep | triton | fa2 | flex |\n|---|---|---|---|---|")
    for batch in (1, 4, 32):
        for keep in (1.0, 0.5, 0.2):
            lengths = lengths_for(batch, max(1, round(197 * keep)), 197, ragged=keep < 1)
            cu, sets = make_inputs(lengths, 1)
            r = {name: host_cost(bound_calls(name, 197, cu, sets)[0], n=100 if quick else 200)
                 for name in ("triton", "fa2", "flex")}
            rows.append({"measure": "flex_host", "batch": batch, "keep": keep, **r})
            print(f"| {batch} | {keep} | {fmt_us(r['triton'])} | {fmt_us(r['fa2'])} | {fmt_us(r['flex'])} |")


def table_gpu(rows: list, quick: bool, silent: bool = False):
    if not silent:
        print("\n## 3. GPU time per call (µs, graph replay, inputs rotated past L2), max_seqlen = capacity")
        print("| batch | tokens/cap | lengths | triton | fa2 | fa2 exact max | triton/fa2 | TFLOP/s triton |")
        print("|---|---|---|---|---|---|---|---|")
    small_ratios, all_ratios = [], []
    for batch, tokens, cap, ragged in gpu_points(quick):
        lengths = lengths_for(batch, tokens, cap, ragged)
        cu, sets = make_inputs(lengths, n_sets(lengths))
        t_tri = gpu_time(bound_calls("triton_out", cap, cu, sets))
        t_fa2 = gpu_time(bound_calls("fa2", cap, cu, sets))
        t_fa2_exact = gpu_time(bound_calls("fa2", max(lengths), cu, sets)) if not silent else float("nan")
        ratio = t_tri / t_fa2
        all_ratios.append(ratio)
        if tokens <= 99:
            small_ratios.append(ratio)
        tf = flops(lengths) / t_tri / 1e12
        rows.append({"measure": "gpu", "batch": batch, "tokens": tokens, "cap": cap, "ragged": ragged,
                     "triton": t_tri, "fa2": t_fa2, "fa2_exact": t_fa2_exact, "tflops": tf})
        if not silent:
            print(f"| {batch} | {tokens}/{cap} | {'±30%' if ragged else 'uniform'} | {fmt_us(t_tri)} | "
                  f"{fmt_us(t_fa2)} | {fmt_us(t_fa2_exact)} | {ratio:.2f} | {tf:.0f} |")
        del sets
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    if not silent:
        print(f"\nworst triton/fa2 = {max(all_ratios):.2f}; geomean over <=99-token points = {gm(small_ratios):.2f}")
    return gm(all_ratios), max(all_ratios)


def table_large(rows: list):
    print("\n## 4. Large: batch 32 x 577 tokens (uniform), TFLOP/s = 4*T*N*d*heads / GPU time")
    lengths = [577] * 32
    cu, sets = make_inputs(lengths, n_sets(lengths))
    r = {name: gpu_time(bound_calls(name + "_out" * (name == "triton"), 577, cu, sets)) for name in ("triton", "fa2")}
    f = flops(lengths)
    rows.append({"measure": "large", **r, "flops": f})
    print("| impl | µs | TFLOP/s | % of 790 |")
    print("|---|---|---|---|")
    for name, t in r.items():
        print(f"| {name} | {fmt_us(t)} | {f / t / 1e12:.0f} | {100 * f / t / 790e12:.0f}% |")


def table_pack(rows: list):
    print("\n## 5. pack + unpack, B=64, N=197, C=768, fp16 (µs, graph replay)")
    print("| keep | pack | unpack | pack+unpack | copy of same bytes x2 | ratio | pack fill=None | ratio fill=None |")
    print("|---|---|---|---|---|---|---|---|")
    for keep in (0.5, 0.2):
        sets = []
        for _ in range(8):
            x = torch.randn(64, 197, 768, dtype=torch.float16, device="cuda")
            m = torch.rand(64, 197, device="cuda") < keep
            sets.append((x, m))
        packed = [pack_tokens(x, m) for x, m in sets]
        t_pack = gpu_time([lambda s=s: pack_tokens(*s) for s in sets])
        # fill=None (what the pruned model uses): the unused capacity is not written
        t_pack_nofill = gpu_time([lambda s=s: pack_tokens(*s, fill=None) for s in sets])
        t_unpack = gpu_time([lambda s=s, p=p: unpack_tokens(p[0], s[1], p[1]) for s, p in zip(sets, packed,
                                                                                                 strict=True)])
        # A plain device copy moving the bytes pack moves (kept rows read + written) and unpack moves
        # (all rows written, kept rows read): the floor for data movement.
        kept = int(sets[0][1].sum())
        src = [torch.randn(kept, 768, dtype=torch.float16, device="cuda") for _ in range(8)]
        dst = [torch.empty_like(s) for s in src]
        full_src = [torch.randn(64 * 197, 768, dtype=torch.float16, device="cuda") for _ in range(8)]
        full_dst = [torch.empty_like(s) for s in full_src]
        t_copy = gpu_time([lambda a=a, b=b: b.copy_(a) for a, b in zip(src, dst, strict=True)])
        t_copy_full = gpu_time([lambda a=a, b=b: b.copy_(a) for a, b in zip(full_src, full_dst, strict=True)])
        floor = t_copy + (t_copy + t_copy_full) / 2
        rows.append({"measure": "pack", "keep": keep, "pack": t_pack, "unpack": t_unpack, "copy": floor,
                     "pack_nofill": t_pack_nofill})
        print(f"| {keep} | {fmt_us(t_pack)} | {fmt_us(t_unpack)} | {fmt_us(t_pack + t_unpack)} | {fmt_us(floor)} | "
              f"{(t_pack + t_unpack) / floor:.2f} | {fmt_us(t_pack_nofill)} | "
              f"{(t_pack_nofill + t_unpack) / floor:.2f} |")


SWEEP_POINTS = [(1, 197, 197, True), (32, 40, 197, False), (32, 99, 197, True), (32, 197, 197, True),
                (128, 197, 197, True), (32, 288, 577, True), (32, 577, 577, False)]


def _sweep_points(specs: list) -> list:
    """(batch, tokens, cap, ragged, cu, sets, FA2 GPU time) per point spec, FA2 measured once."""
    points = []
    for batch, tokens, cap, ragged in specs:
        lengths = lengths_for(batch, tokens, cap, ragged)
        cu, sets = make_inputs(lengths, n_sets(lengths))
        points.append((batch, tokens, cap, ragged, cu, sets, gpu_time(bound_calls("fa2", cap, cu, sets))))
    return points


def _config_ratios(cfg: AttnConfig, points: list, rows: list, measure: str) -> list[float]:
    """triton/FA2 GPU time of `cfg` at every point (rows get one entry each); raises if it fails."""
    scale = default_scale(DIM)
    ratios = []
    for batch, tokens, cap, ragged, cu, sets, t_fa2 in points:
        outs = [torch.empty_like(s[0]) for s in sets]
        calls = [lambda s=s, o=o, cu=cu, cap=cap: ragged_attn_fwd(*s, cu, cap, scale, o, cfg)
                 for s, o in zip(sets, outs, strict=True)]  # fmt: skip
        t = gpu_time(calls)
        ratios.append(t / t_fa2)
        rows.append({"measure": measure, "config": repr(cfg), "batch": batch, "tokens": tokens, "cap": cap,
                     "ragged": ragged, "triton": t, "fa2": t_fa2})  # fmt: skip
    return ratios


def sweep(rows: list):
    """Time every config on a few representative points; FA2 measured once per point."""
    points = _sweep_points(SWEEP_POINTS)
    print("\n## Config sweep: triton/fa2 GPU time per point")
    head = " | ".join(f"B{b} {t}/{c}" for b, t, c, _ in SWEEP_POINTS)
    print(f"| BM | BN | warps | stages | {head} | geomean |")
    print("|---|---|---|---|" + "---|" * (len(SWEEP_POINTS) + 1))
    for bm in (32, 64, 128):
        for bn in (32, 64, 128):
            for warps in (4, 8):
                for stages in (2, 3):
                    try:
                        ratios = _config_ratios(AttnConfig(bm, bn, warps, stages), points, rows, "sweep")
                    except Exception as exc:
                        print(f"| {bm} | {bn} | {warps} | {stages} | failed: {type(exc).__name__}: {exc} |")
                        continue
                    gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
                    cells = " | ".join(f"{r:.2f}" for r in ratios)
                    print(f"| {bm} | {bn} | {warps} | {stages} | {cells} | {gm:.3f} |", flush=True)


VARIANT_POINTS = [(1, 40, 197, False), (1, 99, 197, False), (1, 197, 197, False), (4, 99, 197, False),
                  (4, 197, 197, False), (32, 40, 197, False), (32, 99, 197, False), (32, 99, 197, True),
                  (32, 197, 197, False), (32, 197, 197, True), (128, 99, 197, False), (128, 197, 197, False),
                  (1, 577, 577, False), (4, 577, 577, False), (32, 288, 577, False), (32, 577, 577, False),
                  (128, 577, 577, True)]


def variants(head_dim: int = 64) -> list[AttnConfig]:
    """The table's configs first (the reference rows), then candidates for the points they miss.

    Sweeps of 2026-11-29 (docs/performance.md "Tried and refuted"; logs in docs/device-logs-2026-11.tar.xz).
    The first variant sweep chose the tables' 16-key tails. The next (2026-11-29-s5-run2-*)
    ruled out smaller tiles for the 99-token points: 16-key blocks, 2 warps, 32-row query tiles,
    8 warps on 64 rows and lazy rescaling all lost (geomean 0.72-1.22 of FA2 against 0.68); a fourth
    stage tied. The next (2026-11-29-s6-run1-*) ruled out FA2's own tiling: 128-row tiles
    with 64- or 128-key blocks lose 20-30% at <= 99 tokens (geomean 0.88-1.15 against 0.69), and
    32-key tails tie 16-key ones. At these sizes both kernels are latency-bound (B 32 x 99 tokens is
    ~2.4 us of tensor-core work against 13-16 us measured). Next: fewer pipeline stages (a shorter
    prologue for 2-4 key steps) and wider tails on 64-key blocks (fewer dependent steps).

    Then (2026-11-29-s8-run3-*, -s8-run6-*): a register cap of 80 on the 64 x 32 config
    (6 programs per SM instead of 5) wins where the programs need two waves at 5 per SM (B 32 x 99:
    0.82 -> 0.73) and loses 3-15% at B 1-4: the table's bucket 2. Handing programs out pair-first
    (every pair's first query tile before any second one; the same grid) lost: B 4 x 99 0.84 -> 0.87,
    B 128 x 197 0.71 -> 0.89 (a pair's tiles no longer share K/V in L2); removed. Splitting each tile's
    keys over 2-4 programs merged in the kernel (partials in a workspace, an acq_rel counter, the last
    program merges; commit 41bd1de, log 2026-11-29-s8-run8-*) was correct and lost everywhere: B 1 x 40 0.53 -> 0.83,
    B 4 x 99 0.85 -> 1.07-1.09; removed."""
    # The shipping pair (once where both buckets use the same config; AttnConfig compares by identity).
    table = list({repr(c): c for c in CONFIGS[head_dim]}.values())
    if head_dim == 128:
        # Head dim 128 keeps the first config of 2026-11-29 (64, 64, 4 warps, 2 stages) with a full-width
        # tail: never swept since. Twice the bytes per key row: fewer stages fit, so tails and 8 warps first.
        return table + [
            AttnConfig(64, 64, 4, 2, TAIL_N=16),
            AttnConfig(64, 32, 4, 3, TAIL_N=16),
            AttnConfig(64, 64, 4, 3, TAIL_N=16),
            AttnConfig(64, 64, 8, 2, TAIL_N=16),
            AttnConfig(128, 64, 8, 2, TAIL_N=16),
            AttnConfig(128, 32, 8, 3, TAIL_N=16),
            AttnConfig(64, 128, 8, 2, TAIL_N=32),
        ]
    # H200, 2026-11-29: the table's configs are register-bound on sm_90 (64 x 32: 93 registers, 5 programs per SM;
    # 64 x 64: 120, 4 per SM), and B 32 x 99 tokens needs 768 programs against 660 slots: two waves.
    # A register cap of 80 (no spill in ptxas) gives 6 per SM (792 slots); 96 on 64 x 64 gives 5 where
    # shared memory allows it (2 stages).
    capped = [
        AttnConfig(64, 32, 4, 3, TAIL_N=16, maxnreg=80),
        AttnConfig(64, 32, 4, 2, TAIL_N=16, maxnreg=80),
        AttnConfig(64, 32, 4, 3, TAIL_N=16, maxnreg=72),
        AttnConfig(64, 64, 4, 3, TAIL_N=16, maxnreg=96),
        AttnConfig(64, 64, 4, 2, TAIL_N=16, maxnreg=96),
        AttnConfig(64, 64, 4, 2, TAIL_N=16),
    ]
    if os.environ.get("BENCH_VARIANTS") == "maxnreg":
        return table + capped
    candidates = capped + [
        AttnConfig(64, 32, 4, 2, TAIL_N=16),
        AttnConfig(64, 64, 4, 2, TAIL_N=16),
        AttnConfig(64, 64, 4, 2, TAIL_N=32),
        AttnConfig(64, 64, 4, 2),
        AttnConfig(64, 64, 4, 3),
        AttnConfig(64, 32, 4, 3, TAIL_N=32),
    ]
    return table + candidates


def variant_sweep(rows: list, time_box: float = 240.0):
    """Kernel variants (tail width, K layout) x configs on the uniform points of VARIANT_POINTS, per bucket."""
    t_start = time.perf_counter()
    points = _sweep_points(VARIANT_POINTS)
    print(f"\n## Variant sweep: triton/fa2 GPU time per point (u: uniform, r: ±30%), {HEADS} heads x {DIM}")
    head = " | ".join(f"B{b} {t}/{c}{'r' if r else 'u'}" for b, t, c, r in VARIANT_POINTS)
    print(f"| config | {head} | gm 197 | worst 197 | gm 577 | worst 577 | gm <=99 |")
    print("|---|" + "---|" * (len(VARIANT_POINTS) + 5))
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    for cfg in variants(DIM):
        if time.perf_counter() - t_start > time_box:
            print(f"(time box of {time_box:.0f} s reached: remaining variants not run)")
            break
        name = (f"{cfg.BLOCK_M}/{cfg.BLOCK_N}/{cfg.num_warps}w/{cfg.num_stages}s tail{cfg.tail_n}"
                f"{f' r{cfg.maxnreg}' * bool(cfg.maxnreg)}")
        try:
            ratios = _config_ratios(cfg, points, rows, "variant")
        except Exception as exc:  # noqa: BLE001 - a config that does not compile: say so, go on
            print(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:200]} |")
            continue
        r197 = [r for r, p in zip(ratios, VARIANT_POINTS, strict=True) if p[2] == 197]
        r577 = [r for r, p in zip(ratios, VARIANT_POINTS, strict=True) if p[2] == 577]
        small = [r for r, p in zip(ratios, VARIANT_POINTS, strict=True) if p[1] <= 99]
        cells = " | ".join(f"{r:.2f}" for r in ratios)
        print(f"| {name} | {cells} | {gm(r197):.3f} | {max(r197):.2f} | {gm(r577):.3f} | {max(r577):.2f} | "
              f"{gm(small):.3f} |", flush=True)


def structural(rows: list, quick: bool, time_box: float = 420.0):
    """The structural variants (tools/attention_variants.py) against the shipping kernel at every point of
    the GPU grid, in one run: GPU time per call (graph replay) as variant / shipping, each output checked
    against the shipping kernel's first. Then, per variant, where it wins, and what the grid's FA2 targets
    read if the variant were kept exactly where it wins."""
    from tools.attention_variants import variants

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scale = default_scale(DIM)
    t_start = time.perf_counter()
    per_variant: dict[str, list] = {}
    print("\n## 7. Structural variants: GPU time per call / the shipping kernel's (graph replay); "
          "FA2 and shipping in µs")
    for batch, tokens, cap, ragged in gpu_points(quick):
        if time.perf_counter() - t_start > time_box:
            print(f"(time box of {time_box:.0f} s reached at B {batch} x {tokens}/{cap}: remaining points not run)")
            break
        lengths = lengths_for(batch, tokens, cap, ragged)
        cu, sets = make_inputs(lengths, n_sets(lengths))
        ship_calls = bound_calls("triton_out", cap, cu, sets)
        t_ship = gpu_time(ship_calls)
        t_fa2 = gpu_time(bound_calls("fa2", cap, cu, sets))
        ref = ragged_attention(*sets[0], cu, cap)
        cells = []
        for name, call in variants(cap, sms).items():
            outs = [torch.empty_like(s[0]) for s in sets]
            calls = [lambda s=s, o=o, call=call, cu=cu, cap=cap: call(*s, cu, cap, scale, o)
                     for s, o in zip(sets, outs, strict=True)]
            try:
                calls[0]()
                torch.cuda.synchronize()
                err = (outs[0].float() - ref.float()).abs().max().item()
                if not err <= 2e-2:
                    raise AssertionError(f"max |diff| {err:.3g} against the shipping kernel")
                t = gpu_time(calls)
            except Exception as exc:  # noqa: BLE001 - a variant that does not compile or is wrong: say so, go on
                from benchmarks.timing import restore_rng_after_failed_capture

                restore_rng_after_failed_capture(torch)
                cells.append(f"{name}: {type(exc).__name__}")
                print(f"<!-- B{batch} {tokens}/{cap} {name}: {type(exc).__name__}: {str(exc)[:300]} -->", flush=True)
                continue
            per_variant.setdefault(name, []).append((batch, tokens, cap, ragged, t / t_ship, t_ship, t_fa2, t))
            rows.append({"measure": "structural", "variant": name, "batch": batch, "tokens": tokens, "cap": cap,
                         "ragged": ragged, "variant_s": t, "triton": t_ship, "fa2": t_fa2, "max_diff": err})
            cells.append(f"{name} {t / t_ship:.2f}")
        print(f"| B{batch} {tokens}/{cap} {'r' if ragged else 'u'} | ship {fmt_us(t_ship)} fa2 {fmt_us(t_fa2)} "
              f"| {' · '.join(cells)} |", flush=True)
        del sets
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")  # noqa: E731
    print("\n| variant | points | geomean / shipping | wins (< 0.97) | best | worst | "
          "worst / FA2 kept where it wins | geomean <= 99 tokens / FA2 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, pts in per_variant.items():
        ratios = [p[4] for p in pts]
        wins = [p for p in pts if p[4] < 0.97]
        kept = [min(p[5], p[7]) / p[6] for p in pts]
        small = [min(p[5], p[7]) / p[6] for p in pts if p[1] <= 99]
        where = ", ".join(f"B{p[0]}x{p[1]}{'r' if p[3] else 'u'} {p[4]:.2f}" for p in wins[:8])
        print(f"| {name} | {len(pts)} | {gm(ratios):.3f} | {len(wins)}{f' ({where})' if wins else ''} | "
              f"{min(ratios):.2f} | {max(ratios):.2f} | {max(kept):.2f} | {gm(small):.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    global HEADS, DIM
    HEADS, DIM = 768 // args.head_dim, args.head_dim
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
