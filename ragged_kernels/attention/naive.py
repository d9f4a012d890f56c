"""Test oracle for ragged attention: pure PyTorch, fp32, one segment at a time. Obviously right,
deliberately slow. Not a baseline: benchmarks compare against `ragged_kernels.baselines`."""

from __future__ import annotations

import math

import torch


def ragged_attention_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int | None = None,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Non-causal attention of each segment `cu_seqlens[b]:cu_seqlens[b+1]` with itself.

    Args:
        q, k, v: `[total_tokens, heads, head_dim]`, any float dtype and strides.
        cu_seqlens: int `[B+1]`, non-decreasing offsets into the token dimension.
        max_seqlen: unused (kept for the common call shape).
        scale: softmax scale, default `1/sqrt(head_dim)`.

    Returns:
        fp32 `[total_tokens, heads, head_dim]`; rows outside every segment are zero.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    qf, kf, vf = (t.float() for t in (q, k, v))
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    bounds = cu_seqlens.tolist()
    for bos, eos in zip(bounds[:-1], bounds[1:], strict=True):
        if eos <= bos:
            continue
        qs, ks, vs = (t[bos:eos].transpose(0, 1) for t in (qf, kf, vf))  # [H, L, D]
        p = torch.softmax((qs @ ks.transpose(1, 2)) * scale, dim=-1)
        out[bos:eos] = (p @ vs).transpose(0, 1)
    return out
