"""ATS's inverse-transform sampling (`pruners.ats.ats_keep`) as one Triton kernel: one program per image.

Why: the PyTorch port is ~45 small ops per stage (normalise, stable sort, cumsum, CDF targets, two
searchsorted, gathers, scatters), run at 9 stages of DeiT. In graph mode their launch and tail
latency, not their arithmetic, made ATS run at half the images/s of the dense model on the H200
(session 3: 4,864 vs 9,736 at DeiT-B B 32, with ~95% of the tokens kept).

Same algorithm, step for step, in fp32 (see `ats_keep` for the reference citation):
- scores of valid tokens normalised to sum 1; sorted ascending, stable (ties keep token order: the
  sort key packs the value's order-preserving bits above the token index);
- CDF by cumulative sum, normalised to [0, 1]; targets from the smallest non-zero CDF value to 1;
- each target picks its nearest CDF point (lower index on equal distance, then the first of equal
  CDF values); the picked tokens are kept, each once;
- rows with <= 1 valid token or a degenerate CDF keep their first `n_samples` valid tokens.
Reductions (the normaliser, the cumulative sum) associate differently from PyTorch's, so CDF values
may differ in the last bit; a decision changes only where a target sits within that of the midpoint
between two CDF points. Tests compare decisions with `ats_keep` (CPU interpreter, GPU).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

_TINY = torch.finfo(torch.float32).tiny
_CHUNK = 16  # targets per step: a [16, BLOCK] comparison tile


@triton.jit
def _ordered_bits(x):
    """fp32 -> int32 whose signed order is the float order (negatives flipped)."""
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _ats_keep_kernel(
    SCORES, VALID, KEEP, M, R, stride_s, stride_v, stride_k, tiny,
    BLOCK: tl.constexpr, CHUNK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    o = tl.arange(0, BLOCK)
    inb = o < M
    valid = (tl.load(VALID + row * stride_v + o, mask=inb, other=0) != 0) & inb
    sc = tl.load(SCORES + row * stride_s + o, mask=inb, other=0.0).to(tl.float32)
    s = tl.where(valid, sc, 0.0)
    s = tl.math.div_rn(s, tl.maximum(tl.sum(s, 0), tiny))

    # Stable ascending sort of (valid ? s : +inf) with the permutation: value bits above the index.
    key = tl.where(valid, s, float("inf"))
    packed = (_ordered_bits(key).to(tl.int64) << 32) | o.to(tl.int64)
    packed = tl.where(inb, packed, 0x7FFFFFFFFFFFFFFF)
    packed = tl.sort(packed)
    order = (packed & 0xFFFFFFFF).to(tl.int32)
    vb = (packed >> 32).to(tl.int32)
    s_sorted = (vb ^ ((vb >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)

    n_valid = tl.sum(valid.to(tl.int32), 0)
    vs = o < n_valid
    s_sorted = tl.where(vs, s_sorted, 0.0)
    c = tl.cumsum(s_sorted, 0)
    c_min = tl.sum(tl.where(o == 0, c, 0.0), 0)
    c_max = tl.sum(tl.where(o == tl.maximum(n_valid - 1, 0), c, 0.0), 0)
    c = tl.math.div_rn(c - c_min, c_max - c_min)
    c = tl.where(vs, c, 2.0)  # past the valid ones: ordered, and farther from every target than 1
    c_start = tl.min(tl.where(vs & (c != 0.0), c, float("inf")), 0)
    degenerate = (n_valid <= 1) | (c_start != c_start) | (c_start == float("inf"))
    c = tl.where(degenerate, tl.where(vs, 0.0, 2.0), c)
    c_start = tl.where(degenerate, 1.0, c_start)

    picked = tl.zeros([BLOCK], dtype=tl.int32)
    rf = (R - 1).to(tl.float32)
    step = tl.math.div_rn(1.0, rf)
    for r0 in range(0, R, CHUNK):
        r = r0 + tl.arange(0, CHUNK)
        rm = r < R
        ri = r.to(tl.float32)
        # linspace(0, 1, R), filled from both ends as PyTorch does, then `create_ys`
        lin = tl.where(r < R // 2, step * ri, 1.0 - step * (rf - ri))
        y = c_start + tl.math.div_rn(lin * rf - c_start * ri, rf)
        hi = tl.sum(((c[None, :] < y[:, None]) & inb[None, :]).to(tl.int32), 1)  # searchsorted, left
        lo = tl.maximum(hi - 1, 0)
        hi = tl.minimum(hi, M - 1)
        c_lo = tl.sum(tl.where(o[None, :] == lo[:, None], c[None, :], 0.0), 1)
        c_hi = tl.sum(tl.where(o[None, :] == hi[:, None], c[None, :], 0.0), 1)
        take_lo = tl.abs(y - c_lo) <= tl.abs(y - c_hi)
        c_pick = tl.where(take_lo, c_lo, c_hi)
        first = tl.sum(((c[None, :] < c_pick[:, None]) & inb[None, :]).to(tl.int32), 1)  # first equal value
        hit = (o[None, :] == first[:, None]) & rm[:, None]
        picked = tl.maximum(picked, tl.max(hit.to(tl.int32), 0))

    keep_sorted = (picked != 0) & vs
    whole = valid & (tl.cumsum(valid.to(tl.int32), 0) <= R)
    base = KEEP + row * stride_k
    if degenerate:
        tl.store(base + o, whole.to(tl.int8), mask=inb)
    else:
        tl.store(base + order, keep_sorted.to(tl.int8), mask=inb)


def ats_keep_fused(scores: torch.Tensor, valid: torch.Tensor, n_samples: int,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """`pruners.ats.ats_keep` in one kernel launch (CUDA, or CPU under Triton's interpreter).

    Args:
        scores: [B, M] significance (>= 0), any float dtype; rows may be strided (e.g. `sig[:, 1:]`).
        valid: [B, M] bool, rows may be strided likewise.
        n_samples: R (>= 2).
        out: optional bool [B, M] to write the mask into (e.g. columns 1: of the stage's [B, N] keep
            mask, so no concatenation follows); unit stride along M.

    Returns:
        keep [B, M] bool (`out` when given).
    """
    if scores.dim() != 2 or valid.shape != scores.shape or valid.dtype != torch.bool:
        raise ValueError(f"scores [B, M] and a bool valid mask of the same shape expected, got "
                         f"{tuple(scores.shape)} {valid.dtype} {tuple(valid.shape)}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an int >= 2, got {n_samples!r}")
    if valid.device != scores.device:
        raise ValueError(f"scores and valid must be on one device, got {scores.device} and {valid.device}")
    if out is not None and (out.shape != scores.shape or out.dtype != torch.bool or out.device != scores.device
                            or (out.numel() and out.stride(-1) != 1)):
        raise ValueError(f"out must be bool {tuple(scores.shape)} on {scores.device} with unit stride along M, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    if not scores.is_cuda and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise ValueError(f"the fused ATS sampler needs CUDA tensors (got {scores.device}); on the CPU it runs "
                         "only in Triton's interpreter (TRITON_INTERPRET=1), or use sampler='torch'")
    b, m = scores.shape
    # Every position in [0, M) of every row is written (the kernel stores a whole permutation), so
    # the buffer needs no zero fill.
    keep = out if out is not None else torch.empty((b, m), dtype=torch.bool, device=scores.device)
    if b == 0 or m == 0:
        return keep
    if scores.stride(-1) != 1:
        scores = scores.contiguous()
    if valid.stride(-1) != 1:
        valid = valid.contiguous()
    valid8, keep8 = valid.view(torch.int8), keep.view(torch.int8)
    block = max(16, triton.next_power_of_2(m))
    _ats_keep_kernel[(b,)](
        scores, valid8, keep8, m, n_samples, scores.stride(0), valid8.stride(0), keep8.stride(0), _TINY,
        BLOCK=block, CHUNK=_CHUNK, num_warps=4 if block <= 256 else 8,
    )
    return keep


__all__ = ["ats_keep_fused"]
