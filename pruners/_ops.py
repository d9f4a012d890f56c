"""Sync-free tensor helpers shared by every pruner and the packed DeiT forward.

Why a module of its own: the keep decisions must be computed by the same code from the same tensors
under every attention backend (so their logits compare), and none of it may read a value back to the
host (no `.item()`, `nonzero()`, boolean indexing), so the whole pruned forward can be captured as one
CUDA graph. Every helper here is a fixed sequence of device ops whose shapes depend only on host ints.

Layouts:
- dense: x [B, N, C] with a validity mask [B, N] bool (row b holds its tokens at positions 0..n_b-1,
  CLS at position 0);
- packed: x [R, C] with `cu_seqlens` int32 [B+1]; R (the capacity) is a host int >= cu_seqlens[-1],
  rows past cu_seqlens[-1] are padding whose contents are never read into a valid row.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def uniform_cu_seqlens(batch: int, length: int, device: torch.device) -> torch.Tensor:
    """int32 [B+1] offsets of B segments of `length` rows each: a dense [B, N, ...] batch seen as packed rows."""
    return torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)


def dense_index(cu_seqlens: torch.Tensor, max_seqlen: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices and validity of the right-padded dense view of packed rows (no host sync).

    Computed once per layout and shared by every tensor gathered into it (a stage gathers the
    tokens, and for attention-based pruners the keys and values too: one index, three gathers).

    Args:
        cu_seqlens: int [B+1] offsets into the rows.
        max_seqlen: host int upper bound of any segment length.
        rows: the packed tensors' row count (indices are clamped into it).

    Returns:
        (idx [B, max_seqlen] int64 row of each position, valid [B, max_seqlen] bool).
    """
    pos = torch.arange(max_seqlen, device=cu_seqlens.device)
    # No separate int64 casts of cu_seqlens (each one a kernel per stage): the int64 `pos` promotes
    # inside the comparison and the addition.
    valid = pos[None, :] < (cu_seqlens[1:] - cu_seqlens[:-1])[:, None]
    idx = (cu_seqlens[:-1, None] + pos[None, :]).clamp_(max=rows - 1)
    return idx, valid


def gather_dense(x: torch.Tensor, index: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """`x`'s packed rows [R, ...] as the dense view [B, max_seqlen, ...] of `index` (`dense_index`),
    zeros at invalid positions."""
    idx, valid = index
    dense = x[idx]
    # torch.where, not a multiply: padding rows of a backend's output may hold NaN/garbage. A Python
    # scalar, not a device zero: no fill kernel, and the result keeps x's dtype.
    mask = valid.view(*valid.shape, *([1] * (dense.dim() - 2)))
    return torch.where(mask, dense, False if x.dtype == torch.bool else 0)


def to_dense(x: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather packed rows into a right-padded dense batch (no host sync).

    Args:
        x: packed rows [R, ...].
        cu_seqlens: int [B+1] offsets into the rows.
        max_seqlen: host int upper bound of any segment length.

    Returns:
        (dense [B, max_seqlen, ...] with zeros at invalid positions, valid [B, max_seqlen] bool).
    """
    index = dense_index(cu_seqlens, max_seqlen, x.shape[0])
    return gather_dense(x, index), index[1]


def pack_dense_torch(x: torch.Tensor, keep: torch.Tensor, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure-PyTorch pack: dense [B, N, C] + keep [B, N] -> packed [capacity, C], cu_seqlens int32 [B+1].

    Kept tokens stay in their original order; rows past the kept total are zero. Same contract as
    `ragged_kernels.pack_tokens` (dense form); used by the `reference` backend and where the kernel
    library is absent.

    Args:
        x: [B, N, C].
        keep: [B, N] bool.
        capacity: host int, must be >= the kept total (not checked: that would be a host sync).

    Returns:
        (packed [capacity, C], cu_seqlens int32 [B+1]).
    """
    B, N, C = x.shape
    counts = keep.sum(1)
    cu = F.pad(torch.cumsum(counts, 0), (1, 0)).to(torch.int32)
    dest = cu[:-1].long()[:, None] + torch.cumsum(keep.long(), 1) - 1
    # Dropped tokens all write into one scratch row past the capacity, which is cut off below.
    dest = torch.where(keep, dest, capacity).reshape(-1)
    out = torch.zeros(capacity + 1, C, dtype=x.dtype, device=x.device)
    out.index_put_((dest,), x.reshape(B * N, C))
    return out[:capacity], cu


def rank_desc(score: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Rank of every entry in descending score order within its row (0 = best); invalid entries rank last.

    Args:
        score: [B, N] float.
        valid: [B, N] bool.

    Returns:
        int64 [B, N] ranks (a permutation of 0..N-1 per row; ties broken by position).
    """
    # In the score's own float dtype: widening fp16 to fp32 is exact and monotonic, so the order (and the
    # stable tie order) is the same without an fp32 copy.
    key = torch.where(valid, score if score.is_floating_point() else score.float(), float("-inf"))
    order = torch.argsort(key, dim=1, descending=True, stable=True)
    ar = torch.arange(score.shape[1], device=score.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, ar)


def with_cls(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """The stage mask [B, 1 + M] from token masks a (and b) [B, M] (CLS excluded): True in column 0 (CLS),
    a (& b) in the rest. One fill and one write in place: no `ones_like` + `cat` copy of the mask."""
    full = torch.empty((a.shape[0], a.shape[1] + 1), dtype=torch.bool, device=a.device)
    full[:, 0] = True
    if b is None:
        full[:, 1:] = a
    elif torch.compiler.is_compiling():  # dynamo takes no out= into a strided view; inductor fuses this anyway
        full[:, 1:] = a & b
    else:
        torch.bitwise_and(a, b, out=full[:, 1:])
    return full


def cls_attention(q_cls: torch.Tensor, k: torch.Tensor, valid: torch.Tensor, scale: float) -> torch.Tensor:
    """Row 0 of the softmax attention (the CLS query against every valid key), in fp32.

    Exactly row 0 of the block's full attention matrix, without materialising the N x N matrix.

    Args:
        q_cls: [B, H, D] CLS queries.
        k: [B, N, H, D] keys (dense, zeros at invalid positions).
        valid: [B, N] bool.
        scale: softmax scale (head_dim ** -0.5).

    Returns:
        probabilities [B, H, N] fp32, zero at invalid keys.
    """
    s = torch.einsum("bhd,bnhd->bhn", q_cls.float(), k.float()) * scale
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    return torch.softmax(s, dim=-1)


def _cls_probs_kernel(q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor | None, max_seqlen: int,
                      scale: float) -> torch.Tensor | None:
    """Softmax of `pruners.kernels.cls_scores`'s scores for CUDA q/k [R, H, D] it supports; None otherwise."""
    if not q.is_cuda:
        return None
    from pruners.kernels import cls_scores

    if not cls_scores.supported(q, k):
        return None
    return torch.softmax(cls_scores.cls_scores_packed(q, k, cu_seqlens, max_seqlen, scale), dim=-1)


def cls_attention_packed(
    q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, scale: float,
    index: tuple[torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """`cls_attention` of packed rows: row 0 of every image's softmax attention, [B, H, max_seqlen] fp32.

    On CUDA the scores come from `pruners.kernels.cls_scores` (keys read once, in place); elsewhere the keys are
    gathered into the dense view of `index` (`dense_index(cu_seqlens, max_seqlen, R)`) first. The
    choice depends on the device only, so every attention backend of a model takes the same path.

    Args:
        q, k: [R, H, D] packed rows (each image's CLS query is its first row).
        cu_seqlens: int32 [B+1].
        max_seqlen: host upper bound of the segment lengths.
        scale: softmax scale.
        index: the stage's `dense_index`.
    """
    probs = _cls_probs_kernel(q, k, cu_seqlens, max_seqlen, scale)
    if probs is not None:
        return probs
    return cls_attention(q[cu_seqlens[:-1].long()], gather_dense(k, index), index[1], scale)


def cls_attention_full(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """`cls_attention` of a dense batch with every position valid (the first pruning stage): q, k
    [B, N, H, D] -> [B, H, N] fp32. On CUDA through `pruners.kernels.cls_scores` (rows as B segments of N),
    which reads k in place instead of copying it to fp32 first."""
    B, N = q.shape[:2]
    cu = uniform_cu_seqlens(B, N, q.device) if q.is_cuda else None
    probs = _cls_probs_kernel(q.flatten(0, 1), k.flatten(0, 1), cu, N, scale)
    if probs is not None:
        return probs
    return cls_attention(q[:, 0], k, torch.ones(B, N, dtype=torch.bool, device=q.device), scale)


def value_norms(v: torch.Tensor, index: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """fp32 L2 norms of value vectors with heads concatenated: v [..., H, D] -> [...].

    With `index` (`dense_index` of packed rows v [R, H, D]): the norms of the packed rows, gathered into
    that dense view [B, max_seqlen] (zero at invalid positions); only scalars are gathered.
    """
    norms = torch.linalg.vector_norm(v.flatten(-2), dim=-1, dtype=torch.float32)
    return norms if index is None else gather_dense(norms, index)


def ceil_count(rate: float, counts: torch.Tensor) -> torch.Tensor:
    """ceil(rate * counts) in float64, so device results equal Python's `math.ceil(rate * n)` exactly."""
    return torch.ceil(rate * counts.double()).long()


def host_ceil(rate: float, n: int) -> int:
    """Host twin of `ceil_count`."""
    return math.ceil(rate * n)
