"""The measuring side of `python -m tools.bench_kernels`: the geometry, inputs rotated past L2, the three
timers (host cost, latency, GPU time by graph replay), the implementations compared and the GPU grid's points.

Other GPU tools (tools.bench_ats_sampler, tools.bench_native_launch, tools.bench_ragged_linear) time with the
same functions, through `tools.bench_kernels`.
"""

from __future__ import annotations

import math
import statistics
import time

import torch

from benchmarks.timing import synced_calls
from ragged_kernels import (
    fa2_varlen_attention,
    flex_attention_varlen,
    padded_sdpa_attention,
    ragged_attention,
    varlen_attn_attention,
)

# Changed only by set_head_dim; the tables and sweeps read them as `bench_kernels_measure.HEADS` (not a copy).
HEADS, DIM = 12, 64
L2_BYTES = 60 * 2**20


def set_head_dim(head_dim: int) -> None:
    """DeiT-B's width (768) as heads of `head_dim` (`--head-dim`): the HEADS and DIM every measure reads."""
    global HEADS, DIM
    HEADS, DIM = 768 // head_dim, head_dim


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
