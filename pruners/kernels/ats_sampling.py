"""ATS's inverse-transform sampling (`pruners.ats.ats_keep`) as one Triton kernel: one program per image.

Why: the PyTorch port is ~45 small ops per stage (normalise, stable sort, cumsum, CDF targets, two
searchsorted, gathers, scatters), run at 9 stages of DeiT. In graph mode their launch and tail
latency, not their arithmetic, made ATS run at half the images/s of the dense model on the H200
(2026-11-29: 4,864 vs 9,736 images/s at DeiT-B B 32, with ~95% of the tokens kept).

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

import torch
import triton
import triton.language as tl

from ragged_kernels.runtime import KernelSpec, device_arch, require_device, traceable_op
from ragged_kernels.segments import clamped_segment

_TINY = torch.finfo(torch.float32).tiny
_CHUNK = 16  # targets per step: a [16, BLOCK] comparison tile


def chunk_for(capability: int) -> int:
    """Targets per step on an architecture: 16 as measured on the H200; on sm_80 and sm_89 the
    [16, BLOCK] tile spills 8-40 B per thread (ptxas, 2026-12-01) and [8, BLOCK] spills nothing. The
    same picks either way (the steps only split the targets)."""
    return _CHUNK if capability == 90 else 8


@triton.jit
def _ordered_bits(x):
    """fp32 -> int32 whose signed order is the float order (negatives flipped)."""
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _targets(r0, R, rf, step, c_start, N: tl.constexpr):
    """Targets r0 .. r0 + N - 1 of R (rf = R - 1 as fp32, step = 1 / rf, both loop-invariant): (r, r < R, their
    CDF values y): linspace(0, 1, R), filled from both ends as PyTorch does, then the reference's `create_ys`
    from c_start."""
    r = r0 + tl.arange(0, N)
    ri = r.to(tl.float32)
    lin = tl.where(r < R // 2, step * ri, 1.0 - step * (rf - ri))
    return r, r < R, c_start + tl.math.div_rn(lin * rf - c_start * ri, rf)


@triton.jit
def _count_below(c, y, BLOCK: tl.constexpr, LOG2_BLOCK: tl.constexpr):
    """For each y: how many entries of the non-decreasing c [BLOCK] are < y (searchsorted, left), by a
    binary search of LOG2_BLOCK gathers; equals `sum(c < y)` exactly."""
    pos = tl.zeros(y.shape, dtype=tl.int32)
    for i in tl.static_range(0, LOG2_BLOCK):
        probe = tl.gather(c, pos + ((BLOCK >> (i + 1)) - 1), 0)
        pos = tl.where(probe < y, pos + (BLOCK >> (i + 1)), pos)
    last = tl.gather(c, tl.full(y.shape, BLOCK - 1, tl.int32), 0)  # the steps reach BLOCK - 1 at most
    return tl.where(last < y, BLOCK, pos)


@triton.jit
def _sample(s, valid, o, inb, M, R, tiny, BLOCK: tl.constexpr, CHUNK: tl.constexpr,
            SEARCH: tl.constexpr = False, LOG2_BLOCK: tl.constexpr = 0, TARGETS: tl.constexpr = 0):
    """The sampling of one image's significance `s` [BLOCK] (valid where `valid`): returns
    (keep_sorted, order, degenerate, whole): the sampled flags in sorted order with the permutation that
    sorts, and the fallback (`whole`, in token order) taken where `degenerate`.

    The targets' picks: CHUNK targets per step against every CDF point ([CHUNK, BLOCK] comparison tiles,
    O(R x BLOCK)), or with SEARCH, TARGETS per step by binary search over the sorted CDF and a histogram
    of the picks (O(R log BLOCK)); the same picks either way, since the CDF is non-decreasing."""
    s = tl.where(valid, s, 0.0)
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
    if SEARCH:
        for r0 in range(0, R, TARGETS):
            r, rm, y = _targets(r0, R, rf, step, c_start, TARGETS)
            hi = _count_below(c, y, BLOCK, LOG2_BLOCK)  # c past M is 2.0, above every target: no inb needed
            lo = tl.maximum(hi - 1, 0)
            hi = tl.minimum(hi, M - 1)
            c_lo = tl.gather(c, lo, 0)
            c_hi = tl.gather(c, hi, 0)
            take_lo = tl.abs(y - c_lo) <= tl.abs(y - c_hi)
            first = _count_below(c, tl.where(take_lo, c_lo, c_hi), BLOCK, LOG2_BLOCK)  # first equal value
            # targets past R count where the step's first target does (r0 < R picks something anyway)
            first = tl.where(rm, first, tl.sum(tl.where(r == r0, first, 0), 0))
            picked += tl.histogram(tl.minimum(first, BLOCK - 1), BLOCK)
    else:
        for r0 in range(0, R, CHUNK):
            r, rm, y = _targets(r0, R, rf, step, c_start, CHUNK)
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
    return keep_sorted, order, degenerate, whole


@triton.jit
def _ats_sample_fwd_kernel(
    SCORES, VALID, KEEP, M, R, stride_s, stride_v, stride_k, tiny,
    BLOCK: tl.constexpr, CHUNK: tl.constexpr,
    SEARCH: tl.constexpr = False, LOG2_BLOCK: tl.constexpr = 0, TARGETS: tl.constexpr = 0,
):
    row = tl.program_id(0).to(tl.int64)
    o = tl.arange(0, BLOCK)
    inb = o < M
    valid = (tl.load(VALID + row * stride_v + o, mask=inb, other=0) != 0) & inb
    sc = tl.load(SCORES + row * stride_s + o, mask=inb, other=0.0).to(tl.float32)
    keep_sorted, order, degenerate, whole = _sample(sc, valid, o, inb, M, R, tiny, BLOCK, CHUNK, SEARCH, LOG2_BLOCK,
                                                    TARGETS)
    base = KEEP + row * stride_k
    if degenerate:
        tl.store(base + o, whole.to(tl.int8), mask=inb)
    else:
        tl.store(base + order, keep_sorted.to(tl.int8), mask=inb)


@triton.jit
def _image_tokens(CU, b, n_rows, N, BLOCK: tl.constexpr):
    """Image b's packed rows: (first row, length cut to N, token lanes o (token o is position 1 + o, CLS
    excluded), lanes in [0, N-1), lanes holding a token of the image). Offsets are clamped into
    [0, n_rows] (`clamped_segment`), so nothing outside the rows is read."""
    start, end = clamped_segment(CU, b, n_rows, False)
    length = tl.minimum(end - start, N)
    o = tl.arange(0, BLOCK)
    inb = o < N - 1
    valid = (o + 1 < length) & inb
    return start, length, o, inb, valid


@triton.jit
def _ats_stage_fwd_kernel(
    SCORES, VSQ, CU, KEEP, N, H, R, n_rows, stride_sb, stride_sh, stride_k, tiny,
    H_PAD: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr,
    SEARCH: tl.constexpr = False, LOG2_BLOCK: tl.constexpr = 0, TARGETS: tl.constexpr = 0,
):
    """One image's whole ATS decision from its CLS scores: softmax per head, sum over heads, times the
    value norms of its tokens (the square root of the head sum of `VSQ`, laid out as the scores), then
    `_sample`; writes the [N] keep row (CLS True, past the image's length False)."""
    b = tl.program_id(0)
    start, length, o, inb, valid = _image_tokens(CU, b, n_rows, N, BLOCK)
    M = N - 1
    h = tl.arange(0, H_PAD)
    hm = h < H
    row = b.to(tl.int64) * stride_sb + h.to(tl.int64)[:, None] * stride_sh + 1 + o[None, :]
    # the value norms first: their [H_PAD, BLOCK] tile is dead before the scores' (no spill at H_PAD 16)
    vn = tl.sqrt(tl.sum(tl.load(VSQ + row, mask=hm[:, None] & valid[None, :], other=0.0), 0))
    t = tl.load(SCORES + row, mask=hm[:, None] & valid[None, :], other=float("-inf"))
    s0 = tl.load(SCORES + b.to(tl.int64) * stride_sb + h.to(tl.int64) * stride_sh, mask=hm & (length > 0),
                 other=float("-inf"))
    mx = tl.maximum(tl.max(t, 1), s0)
    mx = tl.where(mx == float("-inf"), 0.0, mx)  # padded heads (and an empty image): no NaN
    e = tl.exp(t - mx[:, None])
    den = tl.sum(e, 1) + tl.exp(s0 - mx)
    den = tl.where(den > 0, den, 1.0)
    probs = tl.sum(tl.math.div_rn(e, den[:, None]), 0)  # [BLOCK]: CLS attention summed over heads
    keep_sorted, order, degenerate, whole = _sample(probs * vn, valid, o, inb, M, R, tiny, BLOCK, CHUNK, SEARCH,
                                                    LOG2_BLOCK, TARGETS)
    base = KEEP + b.to(tl.int64) * stride_k
    tl.store(base, 1)
    if degenerate:
        tl.store(base + 1 + o, whole.to(tl.int8), mask=inb)
    else:
        tl.store(base + 1 + order, keep_sorted.to(tl.int8), mask=inb)


def _search_options(search: bool, block: int, n_samples: int) -> dict:
    """The kernels' constexprs for the targets' search (`_sample`): the comparison tiles, or (search=True)
    a binary search over the BLOCK CDF points, up to 256 targets per step."""
    if not isinstance(search, bool):
        raise TypeError(f"search must be a bool, got {search!r}")
    if not search:
        return {}
    return dict(SEARCH=True, LOG2_BLOCK=block.bit_length() - 1,
                TARGETS=min(256, max(16, triton.next_power_of_2(n_samples))))


def ats_keep_fused(scores: torch.Tensor, valid: torch.Tensor, n_samples: int,
                   out: torch.Tensor | None = None, *, search: bool = False) -> torch.Tensor:
    """`pruners.ats.ats_keep` in one kernel launch (CUDA, or CPU under Triton's interpreter).

    Args:
        scores: [B, M] significance (>= 0), any float dtype; rows may be strided (e.g. `sig[:, 1:]`).
        valid: [B, M] bool, rows may be strided likewise.
        n_samples: R (>= 2).
        out: optional bool [B, M] to write the mask into (e.g. columns 1: of the stage's [B, N] keep
            mask, so no concatenation follows); unit stride along M.
        search: find each target's CDF point by binary search (O(R log M)) instead of the comparison
            tiles (O(R x M)); the same mask either way. On the H200 (2026-12-05, `python -m
            tools.bench_ats_sampler`, which prints both) the search took 0.10-0.15x the tiles' GPU time;
            `ATSPruner` uses it by default.

    Returns:
        keep [B, M] bool (`out` when given).
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`ats_keep_op`)
        keep = ats_keep_op(scores, valid, n_samples, search)
        return keep if out is None else out.copy_(keep)
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
    require_device(scores, "the fused ATS sampler", "use sampler='torch'")
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
    _ats_sample_fwd_kernel[(b,)](
        scores, valid8, keep8, m, n_samples, scores.stride(0), valid8.stride(0), keep8.stride(0), _TINY,
        BLOCK=block, CHUNK=chunk_for(device_arch(scores.device)), num_warps=4 if block <= 256 else 8,
        **_search_options(search, block, n_samples),
    )
    return keep


def ats_stage_fused(scores: torch.Tensor, value_sq: torch.Tensor, cu_seqlens: torch.Tensor, n_rows: int,
                    n_samples: int, *, search: bool = False) -> torch.Tensor:
    """One ATS stage's keep mask from packed-row facts, in one kernel launch (after the CLS scores).

    Equals `ATSPruner.decide` on the same block: significance = (CLS softmax attention summed over heads) x
    value norm, then `ats_keep`'s sampling (the softmax, the head sums and the norms associate differently
    from PyTorch's, so the significance may differ in the last bits; see the module notes).

    Args:
        scores: fp32 [B, H, N] scaled CLS scores (`pruners.kernels.cls_scores.cls_scores_and_value_squares`: -inf
            past each image's length).
        value_sq: fp32 [B, H, N], each head's share of every token's squared value norm (the same call's second
            output): a token's value norm is sqrt(value_sq[b, :, j].sum()).
        cu_seqlens: int32 [B+1] segments of the packed rows (clamped into [0, n_rows], as the scores' kernel
            clamps them; lengths past N are cut to N).
        n_rows: the number of packed rows the scores were read from (q.shape[0]).
        n_samples: R (>= 2).
        search: as `ats_keep_fused`'s (binary search instead of comparison tiles; experimental).

    Returns:
        keep [B, N] bool: CLS (column 0) True, the sampled tokens True, positions past each image's
        length False.
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`ats_stage_op`)
        return ats_stage_op(scores, value_sq, cu_seqlens, n_rows, n_samples, search)
    if scores.dim() != 3 or scores.dtype != torch.float32:
        raise ValueError(f"scores must be fp32 [B, H, N], got {scores.dtype} {tuple(scores.shape)}")
    if value_sq.shape != scores.shape or value_sq.dtype != torch.float32:
        raise ValueError(f"value_sq must be fp32 {tuple(scores.shape)} like the scores, got {value_sq.dtype} "
                         f"{tuple(value_sq.shape)}")
    b, h, n = scores.shape
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.shape != (b + 1,) or not cu_seqlens.is_contiguous():
        raise ValueError(f"cu_seqlens must be a contiguous int32 [B+1] = [{b + 1}], got {cu_seqlens.dtype} "
                         f"{tuple(cu_seqlens.shape)}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an int >= 2, got {n_samples!r}")
    if isinstance(n_rows, bool) or not isinstance(n_rows, int) or not 0 <= n_rows < 2**31:
        raise ValueError(f"n_rows must be an int in [0, 2**31), got {n_rows!r}")
    if len({scores.device, value_sq.device, cu_seqlens.device}) != 1:
        raise ValueError("scores, value_sq and cu_seqlens must be on one device")
    require_device(scores, "the fused ATS stage")
    keep = torch.empty((b, n), dtype=torch.bool, device=scores.device)
    if b == 0 or n == 0:
        return keep
    if n == 1 or h == 0 or n_rows == 0:
        keep[:, 0] = True
        keep[:, 1:] = False
        return keep
    scores, value_sq = scores.contiguous(), value_sq.contiguous()  # one layout for both (no copy when already)
    keep8 = keep.view(torch.int8)
    block = max(16, triton.next_power_of_2(n - 1))
    _ats_stage_fwd_kernel[(b,)](
        scores, value_sq, cu_seqlens, keep8, n, h, n_samples, n_rows,
        scores.stride(0), scores.stride(1), keep8.stride(0), _TINY,
        H_PAD=triton.next_power_of_2(h), BLOCK=block, CHUNK=chunk_for(device_arch(scores.device)),
        num_warps=4 if block <= 256 else 8, **_search_options(search, block, n_samples),
    )
    return keep


def _ats_keep_fake(scores: torch.Tensor, valid: torch.Tensor, n_samples: int, search: bool = False) -> torch.Tensor:
    return torch.empty(scores.shape, dtype=torch.bool, device=scores.device)


@traceable_op("pruners::ats_keep_fused", _ats_keep_fake)
def ats_keep_op(scores: torch.Tensor, valid: torch.Tensor, n_samples: int, search: bool = False) -> torch.Tensor:
    """`ats_keep_fused` (without `out`) as a custom op: what a compiled graph calls."""
    return ats_keep_fused(scores, valid, n_samples, search=search)


def _ats_stage_fake(scores: torch.Tensor, value_sq: torch.Tensor, cu_seqlens: torch.Tensor, n_rows: int,
                    n_samples: int, search: bool = False) -> torch.Tensor:
    return torch.empty((scores.shape[0], scores.shape[2]), dtype=torch.bool, device=scores.device)


@traceable_op("pruners::ats_stage_fused", _ats_stage_fake)
def ats_stage_op(scores: torch.Tensor, value_sq: torch.Tensor, cu_seqlens: torch.Tensor, n_rows: int,
                 n_samples: int, search: bool = False) -> torch.Tensor:
    """`ats_stage_fused` as a custom op: what a compiled graph calls."""
    return ats_stage_fused(scores, value_sq, cu_seqlens, n_rows, n_samples, search=search)


def compile_specs(capability: int = 90) -> list:
    """The shipping compilations (`ragged_kernels.aot.KernelSpec`) for an architecture: the sampler at 196
    and 576 tokens, the stage kernel at the head counts of DeiT-tiny/S/B."""
    args = dict(SCORES="*fp32", VALID="*i8", KEEP="*i8", M="i32", R="i32", stride_s="i32", stride_v="i32",
                stride_k="i32", tiny="fp32")
    chunk = chunk_for(capability)
    tiles = dict(SEARCH=False, LOG2_BLOCK=0, TARGETS=0)
    specs = [KernelSpec(f"ats sampler BLOCK={b}", _ats_sample_fwd_kernel, args, dict(BLOCK=b, CHUNK=chunk, **tiles),
                        dict(num_warps=4 if b <= 256 else 8)) for b in (256, 1024)]
    stage = dict(SCORES="*fp32", VSQ="*fp32", CU="*i32", KEEP="*i8", N="i32", H="i32", R="i32", n_rows="i32",
                 stride_sb="i32", stride_sh="i32", stride_k="i32", tiny="fp32")
    specs += [KernelSpec(f"ats stage H_PAD={h} BLOCK={b}", _ats_stage_fwd_kernel, stage,
                         dict(H_PAD=h, BLOCK=b, CHUNK=chunk, **tiles), dict(num_warps=4 if b <= 256 else 8))
              for h, b in ((16, 256), (8, 256), (4, 64), (16, 1024))]
    search = dict(SEARCH=True, LOG2_BLOCK=8, TARGETS=256)  # `search=True` at DeiT's 196 tokens and samples
    specs += [KernelSpec("ats sampler BLOCK=256 binary search", _ats_sample_fwd_kernel, args,
                         dict(BLOCK=256, CHUNK=chunk, **search), dict(num_warps=4))]
    specs += [KernelSpec(f"ats stage H_PAD={h} BLOCK=256 binary search", _ats_stage_fwd_kernel, stage,
                         dict(H_PAD=h, BLOCK=256, CHUNK=chunk, **search), dict(num_warps=4)) for h in (16, 8)]
    return specs


__all__ = ["ats_keep_fused", "ats_keep_op", "ats_stage_fused", "ats_stage_op"]
