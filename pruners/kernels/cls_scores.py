"""The CLS row of a block's attention scores, read straight from packed rows: one Triton kernel.

Why: an attention-based pruner (EViT, ATS) decides on row 0 of each block's softmax attention. On
packed rows the PyTorch path gathers every image's keys into a zero-padded dense view [B, N, H, D],
masks it, copies it to fp32 and contracts it with the CLS queries: four passes over the keys for a
[B, H, N] result. At DeiT-B B 64 that was ~40% of ATS's stage overhead on the H200 (gathers, `where`
and fp32 copies; 2026-11-29, docs/performance.md "Where the pruned forward's time goes"). This kernel
reads each key row once, where it
lies in the packed buffer (q/k may be strided views of the fused qkv output), and writes the scaled,
masked scores; `torch.softmax` over them gives exactly what `pruners._ops.cls_attention` gives (same
fp32 products; only the summation order of each dot product differs).

Grid: (image, head, key block). Like the attention kernel, it never reads outside [0, R) whatever
`cu_seqlens` holds: segment bounds are clamped, an end before its start is an empty segment.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ragged_kernels.runtime import INTERPRET, KernelSpec, traceable_op


@triton.jit
def _cls_scores_fwd_kernel(
    Q, K, CU, OUT, R, N, scale,
    stride_qr, stride_qh, stride_kr, stride_kh, stride_ob, stride_oh,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    start = tl.minimum(tl.maximum(tl.load(CU + b), 0), R)
    end = tl.minimum(tl.maximum(tl.load(CU + b + 1), start), R)
    length = end - start
    o_d = tl.arange(0, HEAD_DIM)
    j = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    valid = j < length
    q = tl.load(Q + start.to(tl.int64) * stride_qr + h * stride_qh + o_d, mask=(o_d < HEAD_DIM) & (length > 0),
                other=0.0).to(tl.float32)
    rows = (start + j).to(tl.int64)
    k = tl.load(K + rows[:, None] * stride_kr + h * stride_kh + o_d[None, :], mask=valid[:, None], other=0.0)
    s = tl.sum(k.to(tl.float32) * q[None, :], 1) * scale
    s = tl.where(valid, s, float("-inf"))
    tl.store(OUT + b.to(tl.int64) * stride_ob + h * stride_oh + j, s, mask=j < N)


def supported(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether `cls_scores_packed` takes these q/k: [R, H, D] views with unit stride along D, D a power
    of two (DeiT: 64), on CUDA or under Triton's interpreter."""
    on_device = q.is_cuda or INTERPRET
    d = q.shape[-1] if q.dim() == 3 else 0
    return (
        on_device and q.dim() == 3 and k.shape == q.shape and q.device == k.device and d >= 16
        and d & (d - 1) == 0 and q.stride(-1) == 1 and k.stride(-1) == 1
    )


def cls_scores_packed(q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                      scale: float) -> torch.Tensor:
    """Scaled scores of every image's CLS query (its first row) against its keys, on packed rows.

    Args:
        q, k: [R, H, D] packed rows (strided views are fine; unit stride along D).
        cu_seqlens: int32 [B+1] on the same device.
        max_seqlen: host upper bound of the segment lengths (the output's width).
        scale: softmax scale.

    Returns:
        fp32 [B, H, max_seqlen]: q_cls . k * scale at valid positions, -inf past each image's length.
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`cls_scores_op`)
        return cls_scores_op(q, k, cu_seqlens, max_seqlen, float(scale))
    if not supported(q, k):
        raise ValueError(f"cls_scores_packed needs q, k [R, H, D] with D a power of two and unit stride along D, on "
                         f"CUDA or under TRITON_INTERPRET=1; got {tuple(q.shape)} / {tuple(k.shape)} on {q.device}")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.device != q.device:
        raise ValueError(f"cu_seqlens must be int32 [B+1] on {q.device}, got {cu_seqlens.dtype} "
                         f"{tuple(cu_seqlens.shape)} on {cu_seqlens.device}")
    r, h, d = q.shape
    b = cu_seqlens.shape[0] - 1
    out = torch.empty((max(b, 0), h, max_seqlen), dtype=torch.float32, device=q.device)
    if b <= 0 or max_seqlen <= 0 or h == 0:
        return out
    block = min(128, max(16, triton.next_power_of_2(max_seqlen)))
    _cls_scores_fwd_kernel[(b, h, triton.cdiv(max_seqlen, block))](
        q, k, cu_seqlens, out, r, max_seqlen, float(scale),
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), out.stride(0), out.stride(1),
        HEAD_DIM=d, BLOCK_N=block, num_warps=4,
    )
    return out


def _cls_scores_fake(q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                     scale: float) -> torch.Tensor:
    return torch.empty((max(cu_seqlens.shape[0] - 1, 0), q.shape[1], max_seqlen), dtype=torch.float32,
                       device=q.device)


@traceable_op("pruners::cls_scores_packed", _cls_scores_fake)
def cls_scores_op(q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                  scale: float) -> torch.Tensor:
    """`cls_scores_packed` as a custom op: what a compiled graph calls."""
    return cls_scores_packed(q, k, cu_seqlens, max_seqlen, scale)


def compile_specs() -> list:
    """The shipping compilations (`ragged_kernels.aot.KernelSpec`): fp16 q/k, every supported head dim, the
    widest and narrowest key block `cls_scores_packed` picks."""
    args = dict(Q="*fp16", K="*fp16", CU="*i32", OUT="*fp32", R="i32", N="i32", scale="fp32", stride_qr="i32",
                stride_qh="i32", stride_kr="i32", stride_kh="i32", stride_ob="i32", stride_oh="i32")
    return [KernelSpec(f"CLS scores D{d} BLOCK_N={b}", _cls_scores_fwd_kernel, args, dict(HEAD_DIM=d, BLOCK_N=b),
                       dict(num_warps=4)) for d in (32, 64, 128) for b in (16, 128)]


__all__ = ["cls_scores_op", "cls_scores_packed", "supported"]
