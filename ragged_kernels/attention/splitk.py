"""Experimental: the ragged attention kernel split over keys, combined inside the kernel (not in the table).

Why (docs/perf-notes.md, session 8): at few (image, head) pairs the kernel is latency-bound. B 4 x 99
tokens runs 96 programs on 132 SMs, each walking its whole key range in 4 dependent steps; FA2 is only
1.2x slower there. Splitting the keys of every query tile over SPLIT programs shortens each program's
chain and fills more SMs; the last program of a tile to finish merges the partial results, so there is
no second kernel (a launch costs more than the whole gain at these sizes).

How: every program writes its unnormalised partial (accumulator, running max, running sum, fp32) to a
workspace slot, then increments its tile's counter; the program that sees SPLIT - 1 reads the SPLIT
partials, writes the output and resets the counter to zero for the next launch. Workspace and counters
are allocated once per device and size, and kept (a captured CUDA graph may hold their pointers), so
no memset runs per call. Ordering: the partial stores, a CTA barrier, then the counter's acq_rel atomic
(cumulative release over the barrier); the merging program reads the partials after its acquire with
L1-bypassing loads.

Same contract as `ragged_attn_fwd` (validated inputs, any cu_seqlens stays in bounds); Python launch
path only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ragged_kernels.attention.fwd import INTERPRET, LOG2E, _attn_block


@dataclass(frozen=True)
class SplitConfig:
    """BLOCK_M x BLOCK_N tiles, TAIL_N-key masked tail blocks, keys of a tile split over SPLIT programs."""

    BLOCK_M: int = 64
    BLOCK_N: int = 32
    num_warps: int = 4
    num_stages: int = 3
    TAIL_N: int = 16
    SPLIT: int = 2


@triton.jit
def _splitk_kernel(
    Q, K, V, Out, CU, WS, ML, CNT, total_tokens, sm_scale_log2, grid_m,
    STRIDE_QT: tl.constexpr, STRIDE_QH: tl.constexpr, STRIDE_KT: tl.constexpr, STRIDE_KH: tl.constexpr,
    STRIDE_VT: tl.constexpr, STRIDE_VH: tl.constexpr, STRIDE_OT: tl.constexpr, STRIDE_OH: tl.constexpr,
    HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    TAIL_N: tl.constexpr, SPLIT: tl.constexpr, UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_m = pid // SPLIT
    sp = pid % SPLIT
    i_b = i_bh // HEADS
    i_h = i_bh % HEADS
    bos = tl.load(CU + i_b).to(tl.int64)
    eos = tl.load(CU + i_b + 1).to(tl.int64)
    bos = tl.minimum(tl.maximum(bos, 0), total_tokens)
    eos = tl.minimum(tl.maximum(eos, bos), total_tokens)
    seqlen = eos - bos
    start_m = i_m * BLOCK_M
    if start_m >= seqlen:
        return  # every split of an empty tile returns: its counter is never touched

    o_m = start_m + tl.arange(0, BLOCK_M)
    o_d = tl.arange(0, HEAD_DIM)
    m_m = o_m < seqlen
    p_q = Q + (bos + o_m)[:, None] * STRIDE_QT + i_h.to(tl.int64) * STRIDE_QH + o_d[None, :]
    b_q = tl.load(p_q, mask=m_m[:, None], other=0.0)
    if UPCAST:
        b_q = b_q.to(tl.float32)
    b_m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BLOCK_M], dtype=tl.float32)
    b_acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    p_k0 = K + bos * STRIDE_KT + i_h.to(tl.int64) * STRIDE_KH
    p_v0 = V + bos * STRIDE_VT + i_h.to(tl.int64) * STRIDE_VH

    # This split's keys: [k_lo, k_hi), chunks rounded up to whole key blocks (the last split may be empty).
    per = ((seqlen + SPLIT - 1) // SPLIT + BLOCK_N - 1) // BLOCK_N * BLOCK_N
    k_lo = tl.minimum(sp * per, seqlen)
    k_hi = tl.minimum(k_lo + per, seqlen)
    n_full = k_lo + ((k_hi - k_lo) // BLOCK_N) * BLOCK_N
    for start_n in range(k_lo, n_full, BLOCK_N):
        b_m, b_l, b_acc = _attn_block(b_q, b_m, b_l, b_acc, p_k0, p_v0, start_n, k_hi, sm_scale_log2, o_d,
                                      STRIDE_KT, STRIDE_VT, BLOCK_N, False, False, UPCAST, False)
    for start_n in range(n_full, k_hi, TAIL_N):
        b_m, b_l, b_acc = _attn_block(b_q, b_m, b_l, b_acc, p_k0, p_v0, start_n, k_hi, sm_scale_log2, o_d,
                                      STRIDE_KT, STRIDE_VT, TAIL_N, True, False, UPCAST, False)

    tile = i_bh.to(tl.int64) * grid_m + i_m
    slot = tile * SPLIT + sp
    o_r = tl.arange(0, BLOCK_M)
    tl.store(WS + slot * (BLOCK_M * HEAD_DIM) + o_r[:, None] * HEAD_DIM + o_d[None, :], b_acc)
    tl.store(ML + slot * (2 * BLOCK_M) + o_r, b_m)
    tl.store(ML + slot * (2 * BLOCK_M) + BLOCK_M + o_r, b_l)
    tl.debug_barrier()  # every thread's partial is written before the (single-thread) release below
    done = tl.atomic_add(CNT + tile, 1, sem="acq_rel", scope="gpu")
    if done == SPLIT - 1:
        tl.debug_barrier()
        base = tile * SPLIT
        m_all = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            m_all = tl.maximum(m_all, tl.load(ML + (base + s) * (2 * BLOCK_M) + o_r, cache_modifier=".cg"))
        l_all = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            m_s = tl.load(ML + (base + s) * (2 * BLOCK_M) + o_r, cache_modifier=".cg")
            l_s = tl.load(ML + (base + s) * (2 * BLOCK_M) + BLOCK_M + o_r, cache_modifier=".cg")
            w = tl.where(m_s == float("-inf"), 0.0, tl.math.exp2(m_s - m_all))  # an empty split weighs 0
            a_s = tl.load(WS + (base + s) * (BLOCK_M * HEAD_DIM) + o_r[:, None] * HEAD_DIM + o_d[None, :],
                          cache_modifier=".cg")
            l_all += l_s * w
            acc += a_s * w[:, None]
        b_o = acc / l_all[:, None]
        p_o = Out + (bos + o_m)[:, None] * STRIDE_OT + i_h.to(tl.int64) * STRIDE_OH + o_d[None, :]
        tl.store(p_o, b_o.to(Out.dtype.element_ty), mask=m_m[:, None])
        tl.store(CNT + tile, 0)  # ready for the next launch (kernel boundaries order it)


# device index -> [(workspace, max/sum, counters)], the newest last; older ones are kept alive because a
# captured graph may still point at them.
_buffers: dict[int, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}


def _workspace(device: torch.device, tiles: int, cfg: SplitConfig, head_dim: int):
    key = device.index if device.index is not None else -1
    held = _buffers.setdefault(key, [])
    if held:
        ws, ml, cnt = held[-1]
        if cnt.numel() >= tiles and ws.shape[1:] == (cfg.BLOCK_M, head_dim) and ws.shape[0] >= tiles * cfg.SPLIT:
            return ws, ml, cnt
    size = max(tiles, 2 * held[-1][2].numel() if held else tiles)
    ws = torch.empty((size * cfg.SPLIT, cfg.BLOCK_M, head_dim), dtype=torch.float32, device=device)
    ml = torch.empty((size * cfg.SPLIT, 2, cfg.BLOCK_M), dtype=torch.float32, device=device)
    cnt = torch.zeros(size, dtype=torch.int32, device=device)
    held.append((ws, ml, cnt))
    return ws, ml, cnt


def ragged_attn_fwd_splitk(q, k, v, cu_seqlens, max_seqlen: int, scale: float, out: torch.Tensor,
                           cfg: SplitConfig = SplitConfig()) -> torch.Tensor:
    """`ragged_attn_fwd` with the keys of each query tile split over `cfg.SPLIT` programs (validated inputs)."""
    total, heads, head_dim = q.shape
    batch = cu_seqlens.shape[0] - 1
    grid_m = triton.cdiv(max_seqlen, cfg.BLOCK_M)
    if grid_m == 0 or batch <= 0 or total == 0:
        return out
    ws, ml, cnt = _workspace(q.device, grid_m * batch * heads, cfg, head_dim)
    sq, sk, sv, so = q.stride(), k.stride(), v.stride(), out.stride()
    _splitk_kernel[(grid_m * cfg.SPLIT, batch * heads)](
        q, k, v, out, cu_seqlens, ws, ml, cnt, total, scale * LOG2E, grid_m,
        STRIDE_QT=sq[0], STRIDE_QH=sq[1], STRIDE_KT=sk[0], STRIDE_KH=sk[1],
        STRIDE_VT=sv[0], STRIDE_VH=sv[1], STRIDE_OT=so[0], STRIDE_OH=so[1],
        HEADS=heads, HEAD_DIM=head_dim, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, TAIL_N=cfg.TAIL_N,
        SPLIT=cfg.SPLIT, UPCAST=INTERPRET or q.dtype == torch.float32,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out
