"""Threshold-L2's stage decision (`ThresholdL2Pruner._keep_by_norms`) as one Triton kernel: one program per image.

Why: on packed rows the PyTorch path is ~20 small kernels per stage (the dense index, the gathered norms,
a segmented stable argsort and its inverse scatter, the comparisons, the CLS column). In graph mode at
DeiT-B B 64 their latency, not their arithmetic, was most of Threshold-L2's stage overhead on the H200
(2026-11-29, docs/performance.md "Where the pruned forward's time goes"). Here each program reads its
image's token norms where they lie in the
packed rows, sorts them in registers and writes the image's keep row: norms, this kernel and the pack.

Same decision, exactly: rank = position in the stable descending order of the valid token norms (ties by
position, as `pruners._ops.rank_desc`); keep = (norm > threshold) | (rank < min_keep), then rank < cap;
CLS kept; nothing at or past an image's length; under a batch budget, rank < the water level c computed from
every image's count (a first pass writes them). Comparisons are on the same fp32 values, so the masks are
equal, not just close. The threshold is read on the device (a calibrated buffer), so no host sync.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from pruners.kernels.ats_sampling import _image_tokens, _ordered_bits
from ragged_kernels.runtime import KernelSpec, require_device, traceable_op


@triton.jit
def _image_keep(NORMS, CU, THR, b, N, n_rows, min_keep, cap, BLOCK: tl.constexpr):
    """Image b's stage decision before any batch budget: (keep [BLOCK] by rank, order [BLOCK]: the token
    lane at each rank, inb [BLOCK]: lanes in [0, N-1))."""
    start, length, o, inb, valid = _image_tokens(CU, b, n_rows, N, BLOCK)
    x = tl.load(NORMS + start.to(tl.int64) + 1 + o, mask=valid, other=0.0)
    # Stable descending order: ~ordered_bits reverses the float order; the position breaks ties upward.
    key = tl.where(valid, ~_ordered_bits(x), 0x7FFFFFFF)
    packed = (key.to(tl.int64) << 32) | o.to(tl.int64)
    packed = tl.where(inb, packed, 0x7FFFFFFFFFFFFFFF)
    packed = tl.sort(packed)
    order = (packed & 0xFFFFFFFF).to(tl.int32)
    kb = ~((packed >> 32).to(tl.int32))
    x_sorted = (kb ^ ((kb >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
    n_valid = tl.sum(valid.to(tl.int32), 0)
    thr = tl.load(THR)
    rank = o  # sorted position = rank
    keep = ((x_sorted > thr) | (rank < min_keep)) & (rank < cap) & (rank < n_valid)
    return keep, order, inb


@triton.jit
def _threshold_count_fwd_kernel(NORMS, CU, THR, COUNTS, N, n_rows, min_keep, cap, BLOCK: tl.constexpr):
    """Pass 1 under a batch budget: each image's kept count (non-CLS) into COUNTS[b]."""
    b = tl.program_id(0)
    keep, order, inb = _image_keep(NORMS, CU, THR, b, N, n_rows, min_keep, cap, BLOCK)
    tl.store(COUNTS + b, tl.sum(keep.to(tl.int32), 0))


@triton.jit
def _threshold_keep_fwd_kernel(
    NORMS, CU, THR, KEEP, COUNTS, N, n_rows, min_keep, cap, stride_k, n_images, budget,
    BLOCK: tl.constexpr, BUDGET: tl.constexpr, BLOCK_B: tl.constexpr, LEVEL_STEPS: tl.constexpr,
):
    b = tl.program_id(0)
    keep, order, inb = _image_keep(NORMS, CU, THR, b, N, n_rows, min_keep, cap, BLOCK)
    if BUDGET:
        # Water-filling: the largest level c in [0, N] with sum_j min(k_j, c) <= budget (the sum is
        # non-decreasing in c: binary search), every program over the whole batch's counts.
        i = tl.arange(0, BLOCK_B)
        counts = tl.load(COUNTS + i, mask=i < n_images, other=0)
        lo = 0
        hi = N
        for _ in tl.static_range(LEVEL_STEPS):
            mid = (lo + hi + 1) // 2
            fits = tl.sum(tl.minimum(counts, mid), 0) <= budget
            lo = tl.where(fits, mid, lo)
            hi = tl.where(fits, hi, mid - 1)
        keep = keep & (tl.arange(0, BLOCK) < lo)  # rank < c: keep is a prefix in rank order
    base = KEEP + b.to(tl.int64) * stride_k
    tl.store(base, 1)
    tl.store(base + 1 + order, keep.to(tl.int8), mask=inb)


def threshold_keep_fused(norms: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, threshold: torch.Tensor,
                         min_keep: int, cap: int | None, budget: int | None = None) -> torch.Tensor:
    """One Threshold-L2 stage's keep mask from the packed rows' token norms, in one kernel launch (two
    under a batch budget: the images' counts, then the decision).

    Args:
        norms: fp32 [R] L2 norms of the packed rows (CLS rows included; contiguous).
        cu_seqlens: int32 [B+1] segments of the rows (clamped into [0, R]; lengths past max_seqlen are cut).
        max_seqlen: host int N, the mask's width.
        threshold: fp32 tensor with one element on the rows' device (the stage's calibrated threshold).
        min_keep: tokens always kept per image (largest norms first).
        cap: at most this many non-CLS tokens per image (largest norms first), or None.
        budget: at most this many non-CLS tokens over the batch, water-filled (`ThresholdL2Pruner`), or None.

    Returns:
        keep [B, N] bool: CLS True, positions at or past each image's length False.
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`threshold_keep_op`)
        return threshold_keep_op(norms, cu_seqlens, max_seqlen, threshold, min_keep, cap, budget)
    if norms.dim() != 1 or norms.dtype != torch.float32 or not norms.is_contiguous():
        raise ValueError(f"norms must be a contiguous fp32 [R], got {norms.dtype} {tuple(norms.shape)}")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 1 \
            or not cu_seqlens.is_contiguous():
        raise ValueError(f"cu_seqlens must be a contiguous int32 [B+1], got {cu_seqlens.dtype} "
                         f"{tuple(cu_seqlens.shape)}")
    if threshold.numel() != 1 or threshold.dtype != torch.float32:
        raise ValueError(f"threshold must be one fp32 value, got {threshold.dtype} {tuple(threshold.shape)}")
    if len({norms.device, cu_seqlens.device, threshold.device}) != 1:
        raise ValueError("norms, cu_seqlens and threshold must be on one device")
    ints = [("max_seqlen", max_seqlen), ("min_keep", min_keep), ("cap", cap), ("budget", budget)]
    for name, v in ints:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    require_device(norms, "the fused Threshold-L2 stage")
    b, n = cu_seqlens.shape[0] - 1, max_seqlen
    keep = torch.empty((b, n), dtype=torch.bool, device=norms.device)
    if b == 0 or n == 0:
        return keep
    if n == 1 or norms.shape[0] == 0:
        keep[:, 0] = True
        keep[:, 1:] = False
        return keep
    keep8 = keep.view(torch.int8)
    block = max(16, triton.next_power_of_2(n - 1))
    warps = 4 if block <= 256 else 8
    cap = n if cap is None else min(cap, n)
    args = (norms, cu_seqlens, threshold)
    counts = keep8  # unread without a budget
    if budget is not None and budget < b * cap:
        counts = torch.empty(b, dtype=torch.int32, device=norms.device)
        _threshold_count_fwd_kernel[(b,)](*args, counts, n, norms.shape[0], min_keep, cap, BLOCK=block, num_warps=warps)
    else:
        budget = None
    _threshold_keep_fwd_kernel[(b,)](
        *args, keep8, counts, n, norms.shape[0], min_keep, cap, keep8.stride(0), b, 0 if budget is None else budget,
        BLOCK=block, BUDGET=budget is not None, BLOCK_B=triton.next_power_of_2(b) if budget is not None else 1,
        LEVEL_STEPS=n.bit_length() + 1, num_warps=warps,
    )
    return keep


def _threshold_keep_fake(norms: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, threshold: torch.Tensor,
                         min_keep: int, cap: int | None, budget: int | None) -> torch.Tensor:
    return torch.empty((cu_seqlens.shape[0] - 1, max_seqlen), dtype=torch.bool, device=norms.device)


@traceable_op("pruners::threshold_keep_fused", _threshold_keep_fake)
def threshold_keep_op(norms: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, threshold: torch.Tensor,
                      min_keep: int, cap: int | None, budget: int | None) -> torch.Tensor:
    """`threshold_keep_fused` as a custom op: what a compiled graph calls."""
    return threshold_keep_fused(norms, cu_seqlens, max_seqlen, threshold, min_keep, cap, budget)


def compile_specs() -> list:
    """The shipping compilations (`ragged_kernels.aot.KernelSpec`): counts and decision at 196 and 576
    tokens, with and without a batch budget."""
    base = dict(NORMS="*fp32", CU="*i32", THR="*fp32")
    args = dict(**base, KEEP="*i8", COUNTS="*i32", N="i32", n_rows="i32", min_keep="i32", cap="i32", stride_k="i32",
                n_images="i32", budget="i32")
    count_args = dict(**base, COUNTS="*i32", N="i32", n_rows="i32", min_keep="i32", cap="i32")
    specs = []
    for b in (256, 1024):
        warps = dict(num_warps=4 if b <= 256 else 8)
        specs.append(KernelSpec(f"threshold-L2 counts BLOCK={b}", _threshold_count_fwd_kernel, count_args,
                                dict(BLOCK=b), warps))
        for budget, block_b in ((False, 1), (True, 64), (True, 256)):
            specs.append(KernelSpec(f"threshold-L2 stage BLOCK={b} budget={budget} BLOCK_B={block_b}",
                                    _threshold_keep_fwd_kernel, args,
                                    dict(BLOCK=b, BUDGET=budget, BLOCK_B=block_b, LEVEL_STEPS=11), warps))
    return specs


__all__ = ["threshold_keep_fused", "threshold_keep_op"]
