"""The kernel tables of `python -m tools.bench_kernels` (1-6: host cost and its breakdown, latency, GPU time,
the large case, pack + unpack, FlexAttention): each measures its grid and prints it as a markdown table,
one row per point into `rows` (the --json output)."""

from __future__ import annotations

import math
import time

import torch

from ragged_kernels import fa2_varlen_attention, pack_tokens, ragged_attention, unpack_tokens
from ragged_kernels.attention import fwd
from tools import bench_kernels_measure as measuring
from tools.bench_kernels_measure import (
    bound_calls,
    flex_calls,
    flops,
    fmt_us,
    gpu_points,
    gpu_time,
    host_cost,
    latency,
    lengths_for,
    make_inputs,
    n_sets,
)


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
    heads = measuring.HEADS
    parts = {
        "CompiledKernel.run only": lambda: ck.run(grid_m, 4 * heads, 1, stream, function, metadata, None, None, None,
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
