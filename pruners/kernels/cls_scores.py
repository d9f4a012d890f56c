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

from ragged_kernels.runtime import KernelSpec, runs_here, traceable_op
from ragged_kernels.segments import clamped_segment


@triton.jit
def _cls_scores_fwd_kernel(
    Q, K, V, CU, OUT, VSQ, R, N, scale,
    stride_qr, stride_qh, stride_kr, stride_kh, stride_vr, stride_vh, stride_ob, stride_oh,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, WITH_V: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    start, end = clamped_segment(CU, b, R, False)
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
    out = b.to(tl.int64) * stride_ob + h * stride_oh + j
    tl.store(OUT + out, s, mask=j < N)
    if WITH_V:  # this head's share of each value row's squared L2 norm (0 past the length)
        v = tl.load(V + rows[:, None] * stride_vr + h * stride_vh + o_d[None, :], mask=valid[:, None], other=0.0)
        v = v.to(tl.float32)
        tl.store(VSQ + out, tl.sum(v * v, 1), mask=j < N)


def supported(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether `cls_scores_packed` takes these q/k: [R, H, D] views with unit stride along D, D a power
    of two (DeiT: 64), on CUDA or under Triton's interpreter."""
    on_device = runs_here(q)
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
    return _launch(q, k, None, cu_seqlens, max_seqlen, scale)[0]


def cls_scores_and_value_squares(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                                 max_seqlen: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`cls_scores_packed` and, from the same launch, each head's share of every value row's squared norm.

    Why: ATS weighs each token's CLS attention by the L2 norm of its value vector (heads concatenated).
    Taking the norms in their own kernel costs one launch per stage; the programs that read a key block
    read the value block beside it, so the norms come with the scores (the head sum and the square root
    are done by `pruners.kernels.ats_sampling.ats_stage_fused`, which loads all heads anyway).

    Args:
        q, k, v: [R, H, D] packed rows (strided views are fine; unit stride along D).
        cu_seqlens, max_seqlen, scale: as `cls_scores_packed`.

    Returns:
        (scores, value_sq), both fp32 [B, H, max_seqlen]: `value_sq[b, h, j]` = sum_d v[row, h, d]^2 for image
        b's token j (0 past its length); sqrt(value_sq.sum(1)) are the value norms.
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`cls_scores_values_op`)
        return cls_scores_values_op(q, k, v, cu_seqlens, max_seqlen, float(scale))
    return _launch(q, k, v, cu_seqlens, max_seqlen, scale)


def _launch(q, k, v, cu_seqlens, max_seqlen, scale):
    if not supported(q, k) or (v is not None and not supported(q, v)):
        got = " / ".join(str(tuple(t.shape)) for t in (q, k, v) if t is not None)
        raise ValueError(f"cls_scores_packed needs q, k (and v) [R, H, D] with D a power of two and unit stride "
                         f"along D, on CUDA or under TRITON_INTERPRET=1; got {got} on {q.device}")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.device != q.device:
        raise ValueError(f"cu_seqlens must be int32 [B+1] on {q.device}, got {cu_seqlens.dtype} "
                         f"{tuple(cu_seqlens.shape)} on {cu_seqlens.device}")
    r, h, d = q.shape
    b = cu_seqlens.shape[0] - 1
    out = torch.empty((max(b, 0), h, max_seqlen), dtype=torch.float32, device=q.device)
    vsq = torch.empty_like(out) if v is not None else None
    if b <= 0 or max_seqlen <= 0 or h == 0:
        return out, vsq
    block = min(128, max(16, triton.next_power_of_2(max_seqlen)))
    vv = v if v is not None else k  # unread without WITH_V
    _cls_scores_fwd_kernel[(b, h, triton.cdiv(max_seqlen, block))](
        q, k, vv, cu_seqlens, out, vsq if vsq is not None else out, r, max_seqlen, float(scale),
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), vv.stride(0), vv.stride(1), out.stride(0), out.stride(1),
        HEAD_DIM=d, BLOCK_N=block, WITH_V=v is not None, num_warps=_warps(d, block, v is not None),
    )
    return out, vsq


def _warps(head_dim: int, block: int, with_v: bool) -> int:
    """4 warps; 8 where the key and value tiles together crowd 4 warps' registers (ptxas, 2026-12-02: D 128 x
    128 keys spilled 768 B per thread on sm_80/89/90, D 64 x 128 took 209 registers on sm_90)."""
    return 8 if with_v and head_dim * block >= 64 * 128 else 4


def _cls_scores_fake(q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                     scale: float) -> torch.Tensor:
    return torch.empty((max(cu_seqlens.shape[0] - 1, 0), q.shape[1], max_seqlen), dtype=torch.float32,
                       device=q.device)


@traceable_op("pruners::cls_scores_packed", _cls_scores_fake)
def cls_scores_op(q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                  scale: float) -> torch.Tensor:
    """`cls_scores_packed` as a custom op: what a compiled graph calls."""
    return cls_scores_packed(q, k, cu_seqlens, max_seqlen, scale)


def _cls_scores_values_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                            max_seqlen: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    out = _cls_scores_fake(q, k, cu_seqlens, max_seqlen, scale)
    return out, torch.empty_like(out)


@traceable_op("pruners::cls_scores_and_value_squares", _cls_scores_values_fake)
def cls_scores_values_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                         max_seqlen: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`cls_scores_and_value_squares` as a custom op: what a compiled graph calls."""
    return cls_scores_and_value_squares(q, k, v, cu_seqlens, max_seqlen, scale)


def compile_specs() -> list:
    """The shipping compilations (`ragged_kernels.aot.KernelSpec`): fp16 q/k/v, every supported head dim, the
    widest and narrowest key block `cls_scores_packed` picks, with and without the value squares (ATS)."""
    args = dict(Q="*fp16", K="*fp16", V="*fp16", CU="*i32", OUT="*fp32", VSQ="*fp32", R="i32", N="i32",
                scale="fp32", stride_qr="i32", stride_qh="i32", stride_kr="i32", stride_kh="i32", stride_vr="i32",
                stride_vh="i32", stride_ob="i32", stride_oh="i32")
    return [KernelSpec(f"CLS scores{' + value squares' if with_v else ''} D{d} BLOCK_N={b}", _cls_scores_fwd_kernel,
                       args, dict(HEAD_DIM=d, BLOCK_N=b, WITH_V=with_v), dict(num_warps=_warps(d, b, with_v)))
            for with_v in (False, True) for d in (32, 64, 128) for b in (16, 128)]


__all__ = ["cls_scores_and_value_squares", "cls_scores_op", "cls_scores_packed", "cls_scores_values_op", "supported"]
