"""Fused token pack / unpack for pruned ViTs: keep mask → packed tokens + `cu_seqlens`, and back.

Two Triton launches for a pack (a per-segment count, then one copy kernel that also writes
`cu_seqlens` and, unless `fill=None`, fills the unused capacity), one for an unpack, and no host sync: the packed
buffer has a host-known number of rows (`capacity`, default every token), so the whole pruned
forward can be captured as one CUDA graph. Ranks inside a segment come from `tl.cumsum` over the
keep mask, the segment's offset from the counts of the segments before it (B <= a few thousand, one
vector load per program). Layout follows fla's `ops/utils/pack.py`: packed rows in segment order.

Both forms share one kernel:
- dense: x `[B, N, C]`, keep `[B, N]`: segment b is rows `b*N:(b+1)*N` of `x.view(B*N, C)`;
- packed: x `[R, C]` with source segments `source_cu_seqlens [B+1]`, keep `[R]` (a second pruning
  stage on already packed tokens).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ragged_kernels.attention.interface import as_host_int
from ragged_kernels.runtime import KernelSpec, device_arch, require_device, traceable_op
from ragged_kernels.segments import clamped_segment

_BLOCK_C = 128
# Rows per loop step. Capped at 256: a [256, 128] fp16 tile is what the 197-token bucket uses (1.19x
# a copy at B=64 on the H200, 2026-11-29); at 577 tokens the old cap of 1024 made one [1024, 128] tile
# per step and pack/unpack took 119/267 us at B=32 against 7.5/4.4 us at 197 tokens (H200, 2026-11-29,
# asv PackTokens deitb384-b32-keep0.5): the tile no longer fits the registers. Longer segments loop.
_MAX_BLOCK_L = 256
# Rows per loop step when the pack also sums the dropped rows (`fuse_weights`): the product tile is fp32.
_FUSE_BLOCK_L = 64


def _num_warps(block_l: int, device: torch.device) -> int:
    """Warps of a pack/unpack program. 4, as measured on the H200 (2026-11-29: pack + unpack within
    1.02-1.29x of a copy); 8 for a 256-row tile on sm_80 and sm_89, chosen on 2026-12-01 from a ptxas report
    of 308-552 B of spills at 4 warps. That report compiled the channel count unspecialised; compiled as
    the JIT sees DeiT widths (multiples of 16, 2026-12-04, `tools.compile_check`), neither 4 nor 8 warps
    spills there (162-210 and 90-128 registers). Unchanged until timed on such a card."""
    return 8 if block_l == 256 and device_arch(device) != 90 else 4
# What the kernels move: every dtype Triton loads and stores on NVIDIA GPUs (pack/unpack only copy
# and fill). Anything else (complex, the AMD-only fnuz float8s, ...) gets a TypeError naming these.
_SUPPORTED_DTYPES = (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
    torch.bool,
)
_SUPPORTED_DTYPE_SET = frozenset(_SUPPORTED_DTYPES)


@triton.jit
def _segment_bounds(CU_IN, i_b, n_rows, SEG_LEN: tl.constexpr, DENSE: tl.constexpr):
    if DENSE:
        bos = i_b.to(tl.int64) * SEG_LEN
        eos = bos + SEG_LEN
    else:
        bos, eos = clamped_segment(CU_IN, i_b, n_rows, True)
    return bos, eos


@triton.jit
def _per_row(PTR, o_l, m_l, bos, i_b, keep_len, KEEP_SEG: tl.constexpr):
    """Values of a per-row array (the keep mask, the fusion weights) at rows o_l (masked by m_l, 0 there) of
    the segment starting at row bos. KEEP_SEG: PTR is [B, keep_len], indexed by (segment, position in the
    segment), 0 at positions past keep_len; otherwise PTR is indexed by row."""
    if KEEP_SEG:
        pos = o_l - bos
        return tl.load(PTR + i_b.to(tl.int64) * keep_len + pos, mask=m_l & (pos < keep_len), other=0)
    return tl.load(PTR + o_l, mask=m_l, other=0)


@triton.jit
def _load_keep(KEEP, o_l, m_l, bos, i_b, keep_len, KEEP_SEG: tl.constexpr, KEEP_FIRST: tl.constexpr):
    """int32 keep flags of rows o_l (masked by m_l) of the segment starting at row bos (`_per_row`:
    with KEEP_SEG, positions past keep_len are dropped). KEEP_FIRST: each segment's first row is kept."""
    b_keep = _per_row(KEEP, o_l, m_l, bos, i_b, keep_len, KEEP_SEG).to(tl.int32)
    if KEEP_FIRST:
        b_keep = tl.where(m_l & (o_l == bos), 1, b_keep)
    return b_keep


@triton.jit
def _segment_count_kernel(KEEP, CU_IN, COUNTS, n_rows, keep_len, SEG_LEN: tl.constexpr, DENSE: tl.constexpr,
                          KEEP_SEG: tl.constexpr, KEEP_FIRST: tl.constexpr, FUSE: tl.constexpr,
                          BLOCK_L: tl.constexpr):
    """COUNTS[b]: the rows segment b packs to: its kept rows, plus (FUSE) one fused row if it drops any."""
    i_b = tl.program_id(0)
    bos, eos = _segment_bounds(CU_IN, i_b, n_rows, SEG_LEN, DENSE)
    b_n = tl.zeros([BLOCK_L], dtype=tl.int32)
    b_d = tl.zeros([BLOCK_L], dtype=tl.int32)
    for start in range(bos, eos, BLOCK_L):
        o_l = start + tl.arange(0, BLOCK_L)
        m_l = o_l < eos
        b_keep = _load_keep(KEEP, o_l, m_l, bos, i_b, keep_len, KEEP_SEG, KEEP_FIRST)
        b_n += b_keep
        if FUSE:
            b_d += (m_l & (b_keep == 0)).to(tl.int32)
    count = tl.sum(b_n, 0)
    if FUSE:
        count += (tl.sum(b_d, 0) > 0).to(tl.int32)
    tl.store(COUNTS + i_b, count)


@triton.jit
def _pack_unpack_kernel(
    X, Y, KEEP, CU_IN, CU_OUT, COUNTS, W,
    n_rows, capacity, n_channels, n_segments, fill_value, keep_len,
    STRIDE_X: tl.constexpr, STRIDE_Y: tl.constexpr,
    SEG_LEN: tl.constexpr, DENSE: tl.constexpr, PACK: tl.constexpr, FILL: tl.constexpr,
    KEEP_SEG: tl.constexpr, KEEP_FIRST: tl.constexpr, FUSE: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_B: tl.constexpr,
):
    """PACK: Y[capacity] <- kept rows of X[n_rows], writes CU_OUT and (FILL) fills unused capacity;
    FUSE (PACK only): after a segment's kept rows, one row sum(W[r] * X[r]) over the rows it drops (fp32
    accumulation), where it drops any (COUNTS then include that row).
    not PACK: Y[n_rows] <- X[capacity] rows at CU_OUT[b] + rank for kept rows, zero elsewhere."""
    i_b = tl.program_id(0)
    i_c = tl.program_id(1)
    o_c = i_c * BLOCK_C + tl.arange(0, BLOCK_C)
    m_c = o_c < n_channels
    bos, eos = _segment_bounds(CU_IN, i_b, n_rows, SEG_LEN, DENSE)

    if PACK:
        # Offset of this segment in the packed buffer: the kept counts of the segments before it.
        b_acc = tl.zeros([BLOCK_B], dtype=tl.int64)
        for start in range(0, i_b, BLOCK_B):
            o_bb = start + tl.arange(0, BLOCK_B)
            b_acc += tl.load(COUNTS + o_bb, mask=o_bb < i_b, other=0).to(tl.int64)
        offset = tl.sum(b_acc, 0)
        count = tl.load(COUNTS + i_b).to(tl.int64)
        if i_c == 0:
            tl.store(CU_OUT + i_b + 1, tl.minimum(offset + count, capacity).to(tl.int32))
            if i_b == 0:
                tl.store(CU_OUT, 0)
    else:
        offset = tl.load(CU_OUT + i_b).to(tl.int64)
        offset = tl.minimum(tl.maximum(offset, 0), capacity)

    running = offset
    b_fused = tl.zeros([BLOCK_C], dtype=tl.float32)  # FUSE: the dropped rows' weighted sum
    n_dropped = tl.full([], 0, tl.int32)
    for start in range(bos, eos, BLOCK_L):
        o_l = start + tl.arange(0, BLOCK_L)
        m_l = o_l < eos
        b_keep = _load_keep(KEEP, o_l, m_l, bos, i_b, keep_len, KEEP_SEG, KEEP_FIRST)
        o_dst = running + tl.cumsum(b_keep, 0) - 1  # packed row of each kept row
        m_kept = (b_keep != 0) & (o_dst < capacity)
        if PACK and FUSE:  # every row is read: the kept ones are copied, the dropped ones summed
            m_drop = m_l & (b_keep == 0)
            b_x = tl.load(X + o_l[:, None] * STRIDE_X + o_c[None, :], mask=m_l[:, None] & m_c[None, :], other=0.0)
            b_w = tl.where(m_drop, _per_row(W, o_l, m_drop, bos, i_b, keep_len, KEEP_SEG).to(tl.float32), 0.0)
            b_fused += tl.sum(b_x.to(tl.float32) * b_w[:, None], 0)
            n_dropped += tl.sum(m_drop.to(tl.int32), 0)
            tl.store(Y + o_dst[:, None] * STRIDE_Y + o_c[None, :], b_x, mask=m_kept[:, None] & m_c[None, :])
        elif PACK:
            b_x = tl.load(X + o_l[:, None] * STRIDE_X + o_c[None, :], mask=m_kept[:, None] & m_c[None, :])
            tl.store(Y + o_dst[:, None] * STRIDE_Y + o_c[None, :], b_x, mask=m_kept[:, None] & m_c[None, :])
        else:
            b_x = tl.load(X + o_dst[:, None] * STRIDE_X + o_c[None, :], mask=m_kept[:, None] & m_c[None, :],
                          other=0.0)
            tl.store(Y + o_l[:, None] * STRIDE_Y + o_c[None, :], b_x, mask=m_l[:, None] & m_c[None, :])
        running += tl.sum(b_keep, 0)

    if PACK and FUSE:  # the fused row goes right after the segment's kept rows, inside the capacity
        m_f = m_c & (n_dropped > 0) & (running < capacity)
        tl.store(Y + running * STRIDE_Y + o_c, b_fused.to(Y.dtype.element_ty), mask=m_f)

    if PACK and FILL:
        # Fill the unused capacity [total, capacity), split evenly over the segments' programs.
        b_tot = tl.zeros([BLOCK_B], dtype=tl.int64)
        for start in range(0, n_segments, BLOCK_B):
            o_bb = start + tl.arange(0, BLOCK_B)
            b_tot += tl.load(COUNTS + o_bb, mask=o_bb < n_segments, other=0).to(tl.int64)
        total = tl.minimum(tl.sum(b_tot, 0), capacity)
        i_b64 = i_b.to(tl.int64)  # capacity * B passes 2**31 past ~3,300 images of 197 tokens
        z_lo = tl.maximum(total, (capacity * i_b64) // n_segments)
        z_hi = (capacity * (i_b64 + 1)) // n_segments
        for start in range(z_lo, z_hi, BLOCK_L):
            o_z = start + tl.arange(0, BLOCK_L)
            b_fill = tl.full([BLOCK_L, BLOCK_C], fill_value, dtype=tl.float32).to(Y.dtype.element_ty)
            tl.store(Y + o_z[:, None] * STRIDE_Y + o_c[None, :], b_fill, mask=(o_z < z_hi)[:, None] & m_c[None, :])


def _block_l(max_seqlen: int) -> int:
    return max(16, min(_MAX_BLOCK_L, triton.next_power_of_2(max(1, max_seqlen))))


def _dtype_error(t: torch.Tensor, name: str) -> TypeError:
    names = ", ".join(str(d).removeprefix("torch.") for d in _SUPPORTED_DTYPES)
    return TypeError(f"{name} dtype must be one of {names}; got {t.dtype}")


def _check_capacity(capacity) -> int:
    """`capacity` as a Python int (NumPy ints too); a tensor, float or bool is a TypeError, < 0 a ValueError."""
    rows = as_host_int(capacity)
    if rows is None:
        raise TypeError(f"capacity must be a host int (rows of the packed buffer), got {capacity!r}")
    capacity = rows
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0 (rows of the packed buffer), got {capacity}")
    return capacity


def _as_rows(
    x: torch.Tensor, keep: torch.Tensor, source_cu_seqlens: torch.Tensor | None, max_seqlen: int | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int, bool, int]:
    """Validate and view the input as rows `[R, C]` with segments; returns
    (rows, keep_flat, cu_in, batch, seg_len_bound, dense, keep_len); keep_len > 0 when keep is indexed by
    (segment, position) (the packed form's `[B, L]` mask), 0 when it is indexed by row."""
    if not isinstance(x, torch.Tensor) or not isinstance(keep, torch.Tensor):
        raise TypeError("x and keep must be tensors")
    if keep.dtype != torch.bool:
        raise TypeError(f"keep must be a bool mask, got {keep.dtype}")
    if x.dtype not in _SUPPORTED_DTYPE_SET:
        raise _dtype_error(x, "x")
    if keep.device != x.device:
        raise ValueError(f"x and keep must be on one device, got {x.device} and {keep.device}")
    if x.dim() == 3:
        if source_cu_seqlens is not None:
            raise ValueError("source_cu_seqlens is only for packed x [R, C]; x is dense [B, N, C]")
        batch, seq, channels = x.shape
        if keep.shape != (batch, seq):
            raise ValueError(f"keep must be [B, N] = {(batch, seq)}, got {tuple(keep.shape)}")
        if (x.stride(2) != 1 or x.stride(0) != seq * x.stride(1)) and x.numel():  # empty x: no rows to read
            raise ValueError("x [B, N, C] must be viewable as rows [B*N, C] with a contiguous channel axis")
        rows = x.as_strided((batch * seq, channels), (x.stride(1), 1))
        return rows, keep.reshape(-1).contiguous(), keep, batch, seq, True, 0
    if x.dim() == 2:
        if source_cu_seqlens is None:
            raise ValueError("packed x [R, C] needs source_cu_seqlens (int32 [B+1]) for its segments")
        _check_cu(source_cu_seqlens, x.device, "source_cu_seqlens")
        batch = source_cu_seqlens.shape[0] - 1
        keep_len = 0
        if keep.dim() == 2:
            if keep.shape[0] != batch or keep.shape[1] < 1:
                raise ValueError(f"a per-position keep mask must be [B, L] with B = {batch} segments and L >= 1, "
                                 f"got {tuple(keep.shape)}")
            keep_len = keep.shape[1]
        elif keep.shape != (x.shape[0],):
            raise ValueError(f"keep must be [R] = ({x.shape[0]},) or [B, L] = ({batch}, L), got {tuple(keep.shape)}")
        if x.stride(1) != 1 and x.numel():
            raise ValueError("x [R, C] must have a contiguous channel axis")
        max_seqlen = _check_max_seqlen(max_seqlen)
        return x, keep.reshape(-1).contiguous(), source_cu_seqlens, batch, max_seqlen, False, keep_len
    raise ValueError(f"x must be dense [B, N, C] or packed [R, C], got shape {tuple(x.shape)}")


def _check_max_seqlen(max_seqlen) -> int:
    """The packed form's bound as a Python int (NumPy ints too); a tensor, float, bool or None is refused."""
    bound = as_host_int(max_seqlen)
    if bound is None or bound < 0:
        raise TypeError(f"the packed form needs max_seqlen, a non-negative host int bound of the segment lengths, "
                        f"got {max_seqlen!r}")
    return bound


def _check_cu(cu: torch.Tensor, device: torch.device, name: str) -> None:
    if not isinstance(cu, torch.Tensor) or cu.dtype != torch.int32 or cu.dim() != 1 or cu.shape[0] < 1:
        raise ValueError(f"{name} must be an int32 tensor [B+1]")
    if cu.device != device:
        raise ValueError(f"{name} must be on {device}, got {cu.device}")
    if not cu.is_contiguous():
        raise ValueError(f"{name} must be contiguous")


def pack_tokens(
    x: torch.Tensor,
    keep: torch.Tensor,
    *,
    capacity: int | None = None,
    source_cu_seqlens: torch.Tensor | None = None,
    max_seqlen: int | None = None,
    fill: float | None = 0.0,
    keep_first: bool = False,
    fuse_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather the kept tokens of every image into one packed buffer, in order, with no host sync.

    Args:
        x: dense `[B, N, C]` tokens, or packed `[R, C]` rows with `source_cu_seqlens`; any real dtype
            (floating point incl. float8, integer, bool; not complex). Empty x (N = 0, R = 0 or C = 0) is
            fine: no rows gives empty segments (`cu_seqlens` all 0), C = 0 still counts the kept rows.
        keep: bool `[B, N]` (dense); for packed x either `[R]` (one flag per row) or `[B, L]` (one flag
            per segment position: `keep[b, j]` is the j-th row of segment b; positions at or past a
            segment's length are never read, rows at positions >= L are dropped). True keeps the token.
        capacity: rows of the packed buffer, a host int >= 0, NumPy ints too (default: all rows,
            `B*N` or `R`). Must be at least the number of kept tokens; rows past the total hold
            `fill`. Kept tokens that do not fit are dropped and `cu_seqlens` is clamped to the capacity.
        source_cu_seqlens: int32 `[B+1]` segments of packed x.
        max_seqlen: packed form only: host upper bound of the source segment lengths.
        fill: value written to the rows past the kept total (default 0.0); None leaves them
            unwritten, which saves writing (capacity - total) rows where nothing reads them (the
            pruned model's packed blocks: every consumer stops at `cu_seqlens`).
        keep_first: keep every segment's first row whatever `keep` says (a ViT's class token).
        fuse_weights: optional per-row weights, shaped and indexed as `keep` (float16, bfloat16 or
            float32; x float16, bfloat16 or float32): every segment that drops a row gets one more row
            right after its kept ones, `sum(w[r] * x[r])` over its dropped rows, accumulated in fp32
            and stored in x's dtype (EViT's fused token, straight from the rows: no dense view). Its
            row counts in `cu_seqlens` and must fit the capacity like the kept ones.

    Returns:
        `(packed [capacity, C], cu_seqlens int32 [B+1])` on x's device, dtype of x.

    Example:
        >>> packed, cu = pack_tokens(x, keep)          # x [B, 197, 768], keep [B, 197]
        >>> x2 = unpack_tokens(packed, keep, cu)       # == x where keep, 0 elsewhere
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`pack_op`); eager calls skip it
        return pack_op(x, keep, capacity, source_cu_seqlens, max_seqlen, None if fill is None else float(fill),
                       keep_first, fuse_weights)
    rows, keep_flat, cu_in, batch, seg_len, dense, keep_len = _as_rows(x, keep, source_cu_seqlens, max_seqlen)
    if not isinstance(keep_first, bool):
        raise TypeError(f"keep_first must be a bool, got {keep_first!r}")
    weights = _check_fuse_weights(fuse_weights, x, keep)
    require_device(rows, "pack_tokens")
    n_rows, channels = rows.shape
    if capacity is None:
        capacity = n_rows
    elif type(capacity) is not int or capacity < 0:
        capacity = _check_capacity(capacity)
    if fill is not None and (isinstance(fill, bool) or not isinstance(fill, (int, float))):
        raise TypeError(f"fill must be a number or None, got {fill!r}")
    packed = torch.empty((capacity, channels), dtype=x.dtype, device=x.device)
    cu_out = torch.empty((batch + 1,), dtype=torch.int32, device=x.device)
    if batch == 0 or n_rows == 0:  # no segments, or only empty ones (N = 0): nothing to count or copy
        cu_out.zero_()
        if fill is not None:
            packed.fill_(fill)
        return packed, cu_out
    counts = torch.empty((batch,), dtype=torch.int32, device=x.device)
    block_l = _block_l(seg_len)
    fuse = weights is not None
    _segment_count_kernel[(batch,)](keep_flat, cu_in, counts, n_rows, keep_len, SEG_LEN=seg_len if dense else 0,
                                    DENSE=dense, KEEP_SEG=keep_len > 0, KEEP_FIRST=keep_first, FUSE=fuse,
                                    BLOCK_L=block_l)
    grid = (batch, triton.cdiv(max(channels, 1), _BLOCK_C))
    if fuse:  # the fused sum reads every row as fp32: a shorter tile per step keeps it in registers
        block_l = min(block_l, _FUSE_BLOCK_L)
    _pack_unpack_kernel[grid](
        rows, packed, keep_flat, cu_in, cu_out, counts, weights if fuse else keep_flat, n_rows, capacity, channels,
        batch, 0.0 if fill is None else float(fill), keep_len,
        STRIDE_X=rows.stride(0), STRIDE_Y=max(channels, 1), SEG_LEN=seg_len if dense else 0, DENSE=dense,
        PACK=True, FILL=fill is not None, KEEP_SEG=keep_len > 0, KEEP_FIRST=keep_first, FUSE=fuse,
        BLOCK_L=block_l, BLOCK_C=_BLOCK_C, BLOCK_B=256,
        num_warps=_num_warps(block_l, x.device),
    )
    return packed, cu_out


_FUSE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _check_fuse_weights(weights: torch.Tensor | None, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor | None:
    """`fuse_weights` flattened as the kernels index it (as `keep`), after its checks; None stays None."""
    if weights is None:
        return None
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"fuse_weights must be a float tensor shaped as keep, got {type(weights).__name__}")
    if weights.dtype not in _FUSE_DTYPES or x.dtype not in _FUSE_DTYPES:
        raise TypeError(f"fuse_weights and x must be float16, bfloat16 or float32 (the fused row is summed in fp32); "
                        f"got fuse_weights {weights.dtype} and x {x.dtype}")
    if weights.shape != keep.shape:
        raise ValueError(f"fuse_weights must be shaped as keep {tuple(keep.shape)}, got {tuple(weights.shape)}")
    if weights.device != x.device:
        raise ValueError(f"fuse_weights must be on {x.device}, got {weights.device}")
    return weights.reshape(-1).contiguous()


def unpack_tokens(
    packed: torch.Tensor,
    keep: torch.Tensor,
    cu_seqlens: torch.Tensor,
    *,
    source_cu_seqlens: torch.Tensor | None = None,
    max_seqlen: int | None = None,
    rows: int | None = None,
    keep_first: bool = False,
) -> torch.Tensor:
    """Exact inverse of `pack_tokens` on kept rows; zero where `keep` is False.

    Args:
        packed: `[capacity, C]` from `pack_tokens`.
        keep: the same bool mask, `[B, N]` (returns `[B, N, C]`) or, with `source_cu_seqlens` and
            `max_seqlen` as given to `pack_tokens`, `[R]` (returns `[R, C]`) or `[B, L]` (per segment
            position; returns `[rows, C]`).
        cu_seqlens: int32 `[B+1]` returned by `pack_tokens`.
        rows: the source's row count R, for a `[B, L]` mask with `source_cu_seqlens` only.
        keep_first: as given to `pack_tokens`.

    Returns:
        dense `[B, N, C]` or rows `[R, C]`, dtype of packed.
    """
    if torch.compiler.is_compiling():  # one node of the traced graph (`unpack_op`); eager calls skip it
        return unpack_op(packed, keep, cu_seqlens, source_cu_seqlens, max_seqlen, rows, keep_first)
    if not isinstance(packed, torch.Tensor) or packed.dim() != 2 or packed.stride(1) != 1:
        raise ValueError("packed must be a [capacity, C] tensor with a contiguous channel axis")
    if packed.dtype not in _SUPPORTED_DTYPE_SET:
        raise _dtype_error(packed, "packed")
    _check_cu(cu_seqlens, packed.device, "cu_seqlens")
    require_device(packed, "unpack_tokens")
    if not isinstance(keep, torch.Tensor):
        raise TypeError(f"keep must be a bool mask tensor, got {type(keep).__name__}")
    if not isinstance(keep_first, bool):
        raise TypeError(f"keep_first must be a bool, got {keep_first!r}")
    if rows is not None and (keep.dim() != 2 or source_cu_seqlens is None):
        raise ValueError("rows is only for a per-position keep mask [B, L] with source_cu_seqlens")
    keep_len = 0
    if keep.dim() == 2 and source_cu_seqlens is None:
        batch, seq = keep.shape
        out = torch.empty((batch, seq, packed.shape[1]), dtype=packed.dtype, device=packed.device)
        cu_in, seg_len, dense = keep, seq, True
    elif keep.dim() in (1, 2):
        if source_cu_seqlens is None or max_seqlen is None:
            raise ValueError("a packed keep mask [R] needs source_cu_seqlens and max_seqlen")
        _check_cu(source_cu_seqlens, packed.device, "source_cu_seqlens")
        batch, seg_len, dense = source_cu_seqlens.shape[0] - 1, _check_max_seqlen(max_seqlen), False
        n_out = keep.shape[0]
        if keep.dim() == 2:
            if rows is None or isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
                raise TypeError(f"a per-position keep mask [B, L] needs rows, the source's row count, got {rows!r}")
            if keep.shape[0] != batch or keep.shape[1] < 1:
                raise ValueError(f"a per-position keep mask must be [B, L] with B = {batch} segments and L >= 1, "
                                 f"got {tuple(keep.shape)}")
            n_out, keep_len = rows, keep.shape[1]
        # Rows outside every source segment are not visited by the kernel: start from zeros.
        out = torch.zeros((n_out, packed.shape[1]), dtype=packed.dtype, device=packed.device)
        cu_in = source_cu_seqlens
    else:
        raise ValueError(f"keep must be [B, N], [R] or [B, L], got shape {tuple(keep.shape)}")
    if keep.dtype != torch.bool or keep.device != packed.device:
        raise TypeError("keep must be a bool mask on packed's device")
    if cu_seqlens.shape[0] != batch + 1:
        raise ValueError(f"cu_seqlens must have B+1 = {batch + 1} entries, got {cu_seqlens.shape[0]}")
    channels = packed.shape[1]
    if batch == 0 or channels == 0 or out.numel() == 0:  # nothing to copy (view(-1, 0) would be ambiguous)
        return out.zero_()
    rows_out = out.view(-1, channels)
    n_rows = rows_out.shape[0]
    block_l = _block_l(seg_len)
    grid = (batch, triton.cdiv(channels, _BLOCK_C))
    keep_flat = keep.reshape(-1).contiguous()
    _pack_unpack_kernel[grid](
        packed, rows_out, keep_flat, cu_in, cu_seqlens, cu_seqlens, keep_flat, n_rows, packed.shape[0],
        channels, batch, 0.0, keep_len,
        STRIDE_X=packed.stride(0), STRIDE_Y=channels, SEG_LEN=seg_len if dense else 0, DENSE=dense,
        PACK=False, FILL=False, KEEP_SEG=keep_len > 0, KEEP_FIRST=keep_first, FUSE=False,
        BLOCK_L=block_l, BLOCK_C=_BLOCK_C, BLOCK_B=256,
        num_warps=_num_warps(block_l, packed.device),
    )
    return out


def compile_specs(capability: int = 90) -> list:
    """The shipping compilations (`ragged_kernels.aot.KernelSpec`) for an architecture: fp16 rows of DeiT-B's
    width, every form the pruned model and the public API launch (dense / packed source, pack / unpack,
    fill, per-position keep, keep_first, EViT's fused row), and the per-segment count."""
    specs = []
    args = dict(X="*fp16", Y="*fp16", KEEP="*i1", CU_IN="*i1", CU_OUT="*i32", COUNTS="*i32", W="*i1", n_rows="i32",
                capacity="i32", n_channels="i32", n_segments="i32", fill_value="fp32", keep_len="i32")
    for dense, pack, fill, block_l, seg, first, fuse in (
        (True, True, True, 256, False, False, False), (True, True, False, 256, False, False, False),
        (True, False, False, 256, False, False, False), (False, True, False, 128, False, False, False),
        (False, False, False, 128, False, False, False), (True, True, False, 256, False, True, False),
        (False, True, False, 256, True, True, False),
        (True, True, False, _FUSE_BLOCK_L, False, True, True), (False, True, False, _FUSE_BLOCK_L, True, True, True),
    ):
        consts = dict(STRIDE_X=768, STRIDE_Y=768, SEG_LEN=197 if dense else 0, DENSE=dense, PACK=pack, FILL=fill,
                      KEEP_SEG=seg, KEEP_FIRST=first, FUSE=fuse, BLOCK_L=block_l, BLOCK_C=_BLOCK_C, BLOCK_B=256)
        name = f"pack/unpack dense={dense} pack={pack} fill={fill} per-position={seg} keep_first={first}"
        name += " fused row" if fuse else ""
        warps = 8 if block_l == 256 and capability != 90 else 4  # as _num_warps
        types = {**args, "CU_IN": "*i1" if dense else "*i32", "W": "*fp32" if fuse else "*i1"}
        # n_channels: DeiT widths are multiples of 16, which the JIT specialises on (as it compiles a launch)
        specs.append(KernelSpec(name, _pack_unpack_kernel, types, consts, dict(num_warps=warps),
                                divisible=("n_channels",)))
    count_args = dict(KEEP="*i1", CU_IN="*i1", COUNTS="*i32", n_rows="i32", keep_len="i32")
    for dense, seg, first, fuse in ((True, False, False, False), (True, False, True, False),
                                    (False, True, True, False), (True, False, True, True), (False, True, True, True)):
        specs.append(KernelSpec(f"segment count dense={dense} per-position={seg} keep_first={first}"
                                + (" fused row" if fuse else ""),
                                _segment_count_kernel, {**count_args, "CU_IN": "*i1" if dense else "*i32"},
                                dict(SEG_LEN=197 if dense else 0, DENSE=dense, KEEP_SEG=seg, KEEP_FIRST=first,
                                     FUSE=fuse, BLOCK_L=256), dict(num_warps=4)))
    return specs


def _pack_fake(x: torch.Tensor, keep: torch.Tensor, capacity: int | None, source_cu_seqlens: torch.Tensor | None,
               max_seqlen: int | None, fill: float | None, keep_first: bool,
               fuse_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    rows, _, _, batch, _, _, _ = _as_rows(x, keep, source_cu_seqlens, max_seqlen)  # metadata checks only
    _check_fuse_weights(fuse_weights, x, keep)
    n = rows.shape[0] if capacity is None else _check_capacity(capacity)
    return x.new_empty((n, rows.shape[1])), torch.empty((batch + 1,), dtype=torch.int32, device=x.device)


@traceable_op("ragged_kernels::pack_tokens", _pack_fake)
def pack_op(x: torch.Tensor, keep: torch.Tensor, capacity: int | None, source_cu_seqlens: torch.Tensor | None,
            max_seqlen: int | None, fill: float | None, keep_first: bool,
            fuse_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`pack_tokens` as a custom op (`torch.ops.ragged_kernels.pack_tokens`, positional arguments): what a
    compiled graph calls."""
    return pack_tokens(x, keep, capacity=capacity, source_cu_seqlens=source_cu_seqlens, max_seqlen=max_seqlen,
                       fill=fill, keep_first=keep_first, fuse_weights=fuse_weights)


def _unpack_fake(packed: torch.Tensor, keep: torch.Tensor, cu_seqlens: torch.Tensor,
                 source_cu_seqlens: torch.Tensor | None, max_seqlen: int | None, rows: int | None,
                 keep_first: bool) -> torch.Tensor:
    channels = packed.shape[1]
    if keep.dim() == 2 and source_cu_seqlens is None:
        return packed.new_empty((keep.shape[0], keep.shape[1], channels))
    if keep.dim() == 1:
        return packed.new_empty((keep.shape[0], channels))
    if rows is None:  # as unpack_tokens refuses it
        raise TypeError("a per-position keep mask [B, L] needs rows, the source's row count, got None")
    return packed.new_empty((rows, channels))


@traceable_op("ragged_kernels::unpack_tokens", _unpack_fake)
def unpack_op(packed: torch.Tensor, keep: torch.Tensor, cu_seqlens: torch.Tensor,
              source_cu_seqlens: torch.Tensor | None, max_seqlen: int | None, rows: int | None,
              keep_first: bool) -> torch.Tensor:
    """`unpack_tokens` as a custom op (`torch.ops.ragged_kernels.unpack_tokens`): what a compiled graph calls."""
    return unpack_tokens(packed, keep, cu_seqlens, source_cu_seqlens=source_cu_seqlens, max_seqlen=max_seqlen,
                         rows=rows, keep_first=keep_first)


__all__ = ["pack_tokens", "unpack_tokens"]
