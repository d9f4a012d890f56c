"""Triton helpers that read segment bounds from `cu_seqlens` on the device, clamped to the buffers.

The library's kernels and the pruners' own (attention, pack/unpack, the linear layers, the CLS scores, the
ATS and Threshold-L2 stages) take `cu_seqlens` without checking its values on the host (that would sync).
Whatever it holds, every bound they use passes through here, so no load or store leaves the rows: a
segment lies in `[0, n_rows]` and one whose end is before its start is empty.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def clamped_segment(CU, i_b, n_rows, INT64: tl.constexpr):
    """(bos, eos) of segment `i_b` of the offsets CU, clamped: 0 <= bos <= eos <= n_rows; INT64: loaded as
    int64 before the clamp, else in CU's dtype (int32).

    The width is each kernel's own, as its registers were measured with it (`tools.compile_check`,
    2026-12-05): the CLS-scores kernel's D128 x 128 build took 255 registers and spilled 528 B on sm_90
    with int64 bounds (212 and none with int32), and the attention kernel spilled 8-48 B in five builds
    when its bounds were clamped as int32 and widened after."""
    if INT64:
        bos = tl.load(CU + i_b).to(tl.int64)
        eos = tl.load(CU + i_b + 1).to(tl.int64)
    else:
        bos = tl.load(CU + i_b)
        eos = tl.load(CU + i_b + 1)
    bos = tl.minimum(tl.maximum(bos, 0), n_rows)
    eos = tl.minimum(tl.maximum(eos, bos), n_rows)
    return bos, eos


@triton.jit
def clamped_total(CU, n_segments, n_rows):
    """`CU[n_segments]`, the end of the last segment (the rows from it on are padding), clamped into
    [0, n_rows], in CU's dtype."""
    return tl.minimum(tl.maximum(tl.load(CU + n_segments), 0), n_rows)


__all__ = ["clamped_segment", "clamped_total"]
