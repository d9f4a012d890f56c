"""Structural variants of the ragged attention kernel, measured against the shipping kernel on the GPU
(`python -m tools.bench_kernels --structural`) and kept out of the library until one wins there.

The shipping kernel (`ragged_kernels.attention.fwd`) runs one program per (query tile over the capacity,
image, head). Its misses on the H200 (docs/performance.md "Open gaps") have three causes, and each
variant here attacks one:

- **Wave tails and empty programs** -> `persistent`: a fixed grid of `programs` (a multiple of the SM
  count) walks a device-side work list of the *real* (tile, image, head) items, built in every program
  from `cu_seqlens` (a prefix sum over the batch), so no host sync is needed, the grid does not depend
  on the lengths, and tiles past a segment's end are never scheduled.
- **A long dependent chain at B 1-4** -> `short_chain_configs`: the shipping kernel with key blocks as
  wide as the capacity bucket (128 or 256 keys, 4-8 warps, one stage), so a <= 197-token segment is
  one or two softmax steps instead of four to seven.
- **Loads not overlapped with the matrix units at 577 tokens** -> `tma`: Q/K/V tiles through TMA
  tensor descriptors (Hopper's bulk copy engine; sm_90 only), optionally with Triton's automatic warp
  specialisation of the key loop (producer warps issue the copies, consumer warps the `wgmma`s).

Every variant takes the shipping kernel's inputs (q/k/v `[total, heads, head_dim]` views, possibly of
one fused qkv buffer; int32 `cu_seqlens`; the capacity) and is checked against the reference in
tests/tools/test_attention_variants.py (Triton's interpreter on the CPU).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ragged_kernels.attention.fwd import LOG2E, AttnConfig, attn_tile, ragged_attn_fwd
from ragged_kernels.runtime import INTERPRET
from ragged_kernels.segments import clamped_segment

# ---------------------------------------------------------------------------------------------------
# Persistent programs over a device-side work list


@triton.jit(do_not_specialize=["total_tokens", "batch"])
def persistent_attn_kernel(
    Q, K, V, Out, CU, total_tokens, batch, sm_scale_log2,
    STRIDE_QT: tl.constexpr, STRIDE_QH: tl.constexpr, STRIDE_KT: tl.constexpr, STRIDE_KH: tl.constexpr,
    STRIDE_VT: tl.constexpr, STRIDE_VH: tl.constexpr, STRIDE_OT: tl.constexpr, STRIDE_OH: tl.constexpr,
    HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    TAIL_N: tl.constexpr, BLOCK_B: tl.constexpr, UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    # The work list: every image's query tiles (clamped to the buffers as the shipping kernel does),
    # tile-major, heads innermost (programs running side by side read the same K/V rows).
    o_b = tl.arange(0, BLOCK_B)
    in_b = o_b < batch
    starts = tl.load(CU + o_b, mask=in_b, other=0).to(tl.int64)
    ends = tl.load(CU + o_b + 1, mask=in_b, other=0).to(tl.int64)
    starts = tl.minimum(tl.maximum(starts, 0), total_tokens)
    ends = tl.minimum(tl.maximum(ends, starts), total_tokens)
    lens = (ends - starts).to(tl.int32)
    tiles = tl.where(in_b, (lens + BLOCK_M - 1) // BLOCK_M, 0)
    incl = tl.cumsum(tiles, 0)
    excl = incl - tiles
    n_work = tl.sum(tiles, 0) * HEADS
    for w in range(pid, n_work, nprog):
        t = w // HEADS
        i_h = w % HEADS
        i_b = tl.sum((incl <= t).to(tl.int32), 0)
        sel = o_b == i_b
        bos = tl.sum(tl.where(sel, starts, 0), 0)
        seqlen = tl.sum(tl.where(sel, lens, 0), 0)
        start_m = (t - tl.sum(tl.where(sel, excl, 0), 0)) * BLOCK_M
        attn_tile(Q, K, V, Out, bos, seqlen, start_m, i_h, sm_scale_log2, STRIDE_QT, STRIDE_QH, STRIDE_KT,
                  STRIDE_KH, STRIDE_VT, STRIDE_VH, STRIDE_OT, STRIDE_OH, HEAD_DIM, BLOCK_M, BLOCK_N, UPCAST, TAIL_N)


def persistent(q, k, v, cu_seqlens, max_seqlen, scale, out, cfg: AttnConfig, programs: int):
    """The persistent kernel with `cfg`'s tiles on `programs` programs (at most one per work item of
    the capacity grid)."""
    total, heads, head_dim = q.shape
    batch = cu_seqlens.shape[0] - 1
    capacity_items = triton.cdiv(max_seqlen, cfg.BLOCK_M) * batch * heads
    grid = (max(1, min(programs, capacity_items)),)
    sq, sk, sv, so = q.stride(), k.stride(), v.stride(), out.stride()
    persistent_attn_kernel[grid](
        q, k, v, out, cu_seqlens, total, batch, scale * LOG2E,
        STRIDE_QT=sq[0], STRIDE_QH=sq[1], STRIDE_KT=sk[0], STRIDE_KH=sk[1], STRIDE_VT=sv[0], STRIDE_VH=sv[1],
        STRIDE_OT=so[0], STRIDE_OH=so[1], HEADS=heads, HEAD_DIM=head_dim, BLOCK_M=cfg.BLOCK_M,
        BLOCK_N=cfg.BLOCK_N, TAIL_N=cfg.tail_n, BLOCK_B=max(16, triton.next_power_of_2(batch)),
        UPCAST=q.dtype == torch.float32 or INTERPRET, **cfg.compile_options,
    )
    return out


# ---------------------------------------------------------------------------------------------------
# A shorter chain: key blocks as wide as the bucket


def short_chain_configs() -> list[AttnConfig]:
    """Configs of the shipping kernel whose key block covers a <= 128- or <= 256-token segment in one
    masked step (TAIL_N = BLOCK_N, so no full-block loop runs below BLOCK_N tokens)."""
    return [
        AttnConfig(64, 256, 8, 1, TAIL_N=256),
        AttnConfig(32, 256, 4, 1, TAIL_N=256),
        AttnConfig(16, 256, 4, 1, TAIL_N=256),
        AttnConfig(64, 128, 8, 1, TAIL_N=128),
        AttnConfig(64, 128, 4, 2, TAIL_N=128),
        AttnConfig(32, 128, 4, 1, TAIL_N=128),
    ]


def short_chain(q, k, v, cu_seqlens, max_seqlen, scale, out, cfg: AttnConfig):
    return ragged_attn_fwd(q, k, v, cu_seqlens, max_seqlen, scale, out, cfg)


# ---------------------------------------------------------------------------------------------------
# TMA descriptors (+ warp specialisation), sm_90


@triton.jit
def _tma_step(b_q, b_m, b_l, b_acc, desc_k, desc_v, row, col, start_n, seqlen, sm_scale_log2,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    b_k = desc_k.load([row, col])  # [BLOCK_N, HEAD_DIM]; rows past the buffer read as zeros
    b_s = tl.dot(b_q, b_k.T) * sm_scale_log2
    b_v = desc_v.load([row, col])
    if MASKED:
        o_n = start_n + tl.arange(0, BLOCK_N)
        b_s = tl.where((o_n < seqlen)[None, :], b_s, float("-inf"))
        b_v = tl.where((o_n < seqlen)[:, None], b_v, 0.0)  # the next image's rows (finite or not) add nothing
    b_m_new = tl.maximum(b_m, tl.max(b_s, 1))
    b_p = tl.math.exp2(b_s - b_m_new[:, None])
    b_alpha = tl.math.exp2(b_m - b_m_new)
    b_l = b_l * b_alpha + tl.sum(b_p, 1)
    b_acc = b_acc * b_alpha[:, None]
    b_acc = tl.dot(b_p.to(b_v.dtype), b_v, b_acc)
    return b_m_new, b_l, b_acc


@triton.jit(do_not_specialize=["total_tokens"])
def tma_attn_kernel(
    desc_q, desc_k, desc_v, Out, CU, total_tokens, sm_scale_log2,
    STRIDE_OT: tl.constexpr, STRIDE_OH: tl.constexpr, HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):
    i_m = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // HEADS
    i_h = i_bh % HEADS
    bos, eos = clamped_segment(CU, i_b, total_tokens, True)
    bos, seqlen = bos.to(tl.int32), (eos - bos).to(tl.int32)  # descriptor offsets are 32-bit
    start_m = i_m * BLOCK_M
    if start_m >= seqlen:
        return
    col = i_h * HEAD_DIM
    b_q = desc_q.load([bos + start_m, col])
    b_m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BLOCK_M], dtype=tl.float32)
    b_acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    n_full = seqlen // BLOCK_N
    for j in tl.range(0, n_full, warp_specialize=WARP_SPECIALIZE):
        b_m, b_l, b_acc = _tma_step(b_q, b_m, b_l, b_acc, desc_k, desc_v, bos + j * BLOCK_N, col, j * BLOCK_N,
                                    seqlen, sm_scale_log2, BLOCK_N, False)
    if n_full * BLOCK_N < seqlen:
        b_m, b_l, b_acc = _tma_step(b_q, b_m, b_l, b_acc, desc_k, desc_v, bos + n_full * BLOCK_N, col,
                                    n_full * BLOCK_N, seqlen, sm_scale_log2, BLOCK_N, True)
    o_m = start_m + tl.arange(0, BLOCK_M)
    o_d = tl.arange(0, HEAD_DIM)
    b_o = b_acc / b_l[:, None]
    p_o = Out + (bos + o_m).to(tl.int64)[:, None] * STRIDE_OT + i_h.to(tl.int64) * STRIDE_OH + o_d[None, :]
    tl.store(p_o, b_o.to(Out.dtype.element_ty), mask=(o_m < seqlen)[:, None])


def _rows_descriptor(x: torch.Tensor, block_rows: int):
    """A 2-D TMA descriptor over `x` ([total, heads, head_dim], heads x head_dim contiguous within a row)
    as [total, heads * head_dim], one [block_rows, head_dim] tile per load."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    total, heads, head_dim = x.shape
    if x.stride(2) != 1 or x.stride(1) != head_dim:
        raise ValueError(f"tma variant needs heads x head_dim contiguous in each row, got strides {x.stride()}")
    return TensorDescriptor(x, [total, heads * head_dim], [x.stride(0), 1], [block_rows, head_dim])


def tma(q, k, v, cu_seqlens, max_seqlen, scale, out, block_m: int = 64, block_n: int = 64, num_warps: int = 4,
        num_stages: int = 2, warp_specialize: bool = False):
    if q.dtype == torch.float32:
        raise ValueError("tma variant: fp16/bf16 only")
    total, heads, head_dim = q.shape
    batch = cu_seqlens.shape[0] - 1
    grid = (triton.cdiv(max_seqlen, block_m), batch * heads, 1)
    so = out.stride()
    tma_attn_kernel[grid](
        _rows_descriptor(q, block_m), _rows_descriptor(k, block_n), _rows_descriptor(v, block_n), out, cu_seqlens,
        total, scale * LOG2E, STRIDE_OT=so[0], STRIDE_OH=so[1], HEADS=heads, HEAD_DIM=head_dim, BLOCK_M=block_m,
        BLOCK_N=block_n, WARP_SPECIALIZE=warp_specialize, num_warps=num_warps, num_stages=num_stages,
    )
    return out


def variants(max_seqlen: int, sm_count: int) -> dict[str, object]:
    """name -> call(q, k, v, cu_seqlens, max_seqlen, scale, out) for every variant that applies to a
    capacity: persistent on the table's tiles at 4/5/6/8 programs per SM, the short-chain configs (at
    capacities <= 256), TMA tiles with and without warp specialisation."""
    from ragged_kernels.attention.fwd import table_config

    out: dict[str, object] = {}
    for per_sm in (4, 5, 6, 8):
        def call(q, k, v, cu, cap, scale, o, per_sm=per_sm):
            cfg, _ = table_config(q.shape[2], cap, (cu.shape[0] - 1) * q.shape[1], q.dtype)
            return persistent(q, k, v, cu, cap, scale, o, cfg, per_sm * sm_count)

        out[f"persistent {per_sm}/SM"] = call
    if max_seqlen <= 256:
        for cfg in short_chain_configs():
            out[f"chain {cfg.BLOCK_M}x{cfg.BLOCK_N} {cfg.num_warps}w {cfg.num_stages}s"] = (
                lambda q, k, v, cu, cap, scale, o, cfg=cfg: short_chain(q, k, v, cu, cap, scale, o, cfg))
    for bm, bn, warps, stages, ws in ((64, 64, 4, 2, False), (64, 64, 4, 3, False), (128, 64, 8, 2, False),
                                      (64, 64, 4, 2, True), (128, 64, 8, 2, True), (128, 128, 8, 2, True)):
        out[f"tma {bm}x{bn} {warps}w {stages}s{' ws' * ws}"] = (
            lambda q, k, v, cu, cap, scale, o, a=(bm, bn, warps, stages, ws): tma(q, k, v, cu, cap, scale, o, *a))
    return out
