"""Baselines: the other ways to run ragged attention, each a thin wrapper with the call shape of
`ragged_attention(q, k, v, cu_seqlens, max_seqlen, *, scale=None)`. Competitors for the benchmarks,
not test oracles (that is `attention/naive.py`).

- `padded_sdpa_attention`: pad to the batch's *longest kept* length (not the unpruned 197), one
  boolean key mask, fused SDPA; unpad with a gather. A strong baseline, unlike the paper's Python
  loop padded to 197. It reads the longest length back (one host sync): that is what padding costs.
- `fa2_varlen_attention`: FlashAttention-2 varlen: `flash_attn.flash_attn_varlen_func` when the
  package is installed, otherwise the same FA2 kernel that torch vendors
  (`torch.ops.aten._flash_attention_forward`, FA 2.5.7 in torch 2.11). `max_seqlen` is passed as the
  given bound, so it does not sync either.
- `varlen_attn_attention`: PyTorch's public `torch.nn.attention.varlen.varlen_attn` (torch >= 2.10).
- `nested_sdpa_attention`: NestedTensor (jagged layout) + SDPA, what PyTorch offers out of the box.
- `flex_attention_varlen`: FlexAttention (torch >= 2.5) with a document mask built from `cu_seqlens`,
  compiled once per row count: what a user of recent torch reaches for first for ragged batches.

None of them checks its inputs on the way in (their host cost is benchmarked against ours, so they
get no extra Python work on success). When one raises, `_explain` runs `ragged_attention`'s own
validator: bad inputs get its clear error (chained to the original); on good ones, and for device
errors and a missing backend (NotImplementedError), the original exception propagates unchanged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ragged_kernels.attention.interface import check_inputs, host_int_bound

try:  # optional: the real flash-attn package
    from flash_attn import flash_attn_varlen_func as _flash_attn_varlen_func
except ImportError:
    _flash_attn_varlen_func = None


# Not input errors: a missing backend, and the device's own (out of memory, a failed CUDA call). They
# propagate as they are, whatever the inputs look like.
# (getattr: not every torch release has each of these classes.)
_NOT_INPUT_ERRORS = (NotImplementedError,) + tuple(
    cls for cls in (getattr(torch, "OutOfMemoryError", None), getattr(torch, "AcceleratorError", None),
                    getattr(torch.cuda, "CudaError", None), getattr(torch.cuda, "DeferredCudaCallError", None))
    if isinstance(cls, type)
)


def _explain(exc: Exception, q, k, v, cu_seqlens, max_seqlen, not_input_errors=_NOT_INPUT_ERRORS) -> None:
    """After a baseline raised `exc`: raise `ragged_attention`'s clear error if the inputs are bad.

    Returns (the caller then re-raises `exc` unchanged) when they pass the shared check, and for
    `not_input_errors`. Reads only metadata (no device sync).
    """
    if isinstance(exc, not_input_errors):
        return
    try:
        check_inputs(q, k, v, cu_seqlens, host_int_bound(max_seqlen))
    except (TypeError, ValueError) as clear:
        raise clear from exc


def _scale(q: torch.Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale


def _segments_ending_by(cu_seqlens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """For each row index: how many segments end at or before it (its segment, for rows inside one).

    Searches the whole `cu_seqlens`, never the slice `cu_seqlens[1:]`: under torch.compile (inductor,
    torch 2.11, CUDA) searchsorted over that slice returned wrong segments, so padded_sdpa compiled
    differed from eager by up to 1.07 (H200, 2026-12-01); over the whole tensor it matched exactly."""
    return (torch.searchsorted(cu_seqlens, rows, right=True) - 1).clamp_(min=0)


def _segment_of_rows(cu_seqlens: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For each packed row: its segment b and position inside it (rows past the end map to B-1)."""
    rows = torch.arange(total, device=cu_seqlens.device, dtype=torch.int32)
    seg = _segments_ending_by(cu_seqlens, rows).clamp_(max=cu_seqlens.shape[0] - 2)
    pos = rows - cu_seqlens[seg]
    return seg, pos


def padded_sdpa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *,
    scale: float | None = None, pad_to_bound: bool = False,
) -> torch.Tensor:
    """Pad each segment to the batch's longest kept length, fused SDPA with a key mask, unpad.

    `pad_to_bound=True` pads to `max_seqlen` instead (no host sync, so it can be captured as a CUDA
    graph: what a graph-mode user of padded attention runs; every segment then computes the bound's keys)."""
    try:
        total, heads, head_dim = q.shape
        batch = cu_seqlens.shape[0] - 1
        lengths = cu_seqlens[1:] - cu_seqlens[:-1]
        if pad_to_bound:
            longest = host_int_bound(max_seqlen) if batch else 0
        else:
            longest = int(lengths.max()) if batch else 0  # host sync: the padded length must be known
        out = torch.zeros_like(q)
        if longest <= 0 or total == 0:
            return out
        pos = torch.arange(longest, device=q.device, dtype=torch.int32)
        valid = pos[None, :] < lengths[:, None]  # [B, L]
        # Padded positions gather the segment's own first row, not the rows after it: SDPA multiplies
        # masked keys' values by a zero weight, and 0 x NaN from an unwritten padding row would be NaN.
        idx = (cu_seqlens[:-1, None] + torch.where(valid, pos[None, :], 0)).clamp_(max=total - 1).long()  # [B, L]

        def pad(t: torch.Tensor) -> torch.Tensor:
            return t[idx].transpose(1, 2)  # [B, L, H, D] -> [B, H, L, D]

        mask = valid[:, None, None, :]
        o = F.scaled_dot_product_attention(pad(q), pad(k), pad(v), attn_mask=mask, scale=_scale(q, scale))
        seg, p = _segment_of_rows(cu_seqlens, total)
        inside = (p < lengths[seg]) & (p >= 0)
        o_rows = o.transpose(1, 2)[seg.long(), p.clamp(0, longest - 1).long()]  # [T, H, D]
        return torch.where(inside[:, None, None], o_rows, out)
    except Exception as exc:
        _explain(exc, q, k, v, cu_seqlens, max_seqlen)
        raise


def fa2_varlen_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *,
    scale: float | None = None,
) -> torch.Tensor:
    """FlashAttention-2 varlen forward (flash-attn package if installed, else torch's vendored FA2)."""
    try:
        if not q.is_cuda:
            raise NotImplementedError("FlashAttention-2 varlen needs a CUDA device")
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise NotImplementedError(f"FlashAttention-2 supports float16/bfloat16, not {q.dtype}")
        s = _scale(q, scale)
        if _flash_attn_varlen_func is not None:
            return _flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, softmax_scale=s)
        return torch.ops.aten._flash_attention_forward(
            q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, 0.0, False, False, scale=s
        )[0]
    except Exception as exc:
        _explain(exc, q, k, v, cu_seqlens, max_seqlen)
        raise


def varlen_attn_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *,
    scale: float | None = None,
) -> torch.Tensor:
    """PyTorch's public varlen API (`torch.nn.attention.varlen.varlen_attn`, torch >= 2.10, CUDA)."""
    try:
        try:
            from torch.nn.attention.varlen import varlen_attn
        except ImportError as exc:
            raise NotImplementedError("torch.nn.attention.varlen.varlen_attn needs torch >= 2.10") from exc
        if not q.is_cuda:
            raise NotImplementedError("varlen_attn needs a CUDA device")
        out = varlen_attn(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, scale=_scale(q, scale))
        assert isinstance(out, torch.Tensor)  # a (output, aux) pair only with return_aux
        return out
    except Exception as exc:
        _explain(exc, q, k, v, cu_seqlens, max_seqlen)
        raise


def nested_sdpa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *,
    scale: float | None = None,
) -> torch.Tensor:
    """NestedTensor (jagged) + SDPA. Rows past `cu_seqlens[-1]` come back as zeros.

    The jagged values must be exactly the covered rows, so this reads `cu_seqlens[-1]` back (a
    host sync); NestedTensor's own dispatch costs milliseconds per call anyway (2.5-6 ms of host time per
    call against ~10 us of GPU time, measured before 2026-11-29: a Python tensor subclass whose every op
    goes through `__torch_dispatch__`).
    """
    try:
        if cu_seqlens.shape[0] == 1:  # no images: nothing to attend (NestedTensor needs at least one)
            return torch.zeros_like(q)
        offsets = cu_seqlens.long()
        covered = int(cu_seqlens[-1])

        def nest(t: torch.Tensor) -> torch.Tensor:
            nt = torch.nested.nested_tensor_from_jagged(t[:covered], offsets, max_seqlen=max_seqlen)  # [B, j, H, D]
            return nt.transpose(1, 2)

        o = F.scaled_dot_product_attention(nest(q), nest(k), nest(v), scale=_scale(q, scale))
        out = torch.zeros_like(q)
        out[:covered] = o.transpose(1, 2).values()
        return out
    except Exception as exc:
        _explain(exc, q, k, v, cu_seqlens, max_seqlen)
        raise


# FlexAttention's kernels are generated by torch.compile; uncompiled it runs an unfused reference.
# One compiled function each, shared by every row count: torch.compile's default (automatic dynamic
# shapes) compiles the first row count statically and, at the next one, once more with the row count
# symbolic, which then serves every other.
_flex_compiled: dict[str, object] = {}
FLEX_BLOCK = 128  # FlexAttention's default block size (queries and keys)


def _flex_functions(device: torch.device):
    """(flex_attention, create_block_mask): compiled on CUDA, eager elsewhere (CPU tests)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as exc:
        raise NotImplementedError("FlexAttention needs torch >= 2.5") from exc
    if device.type != "cuda":
        return flex_attention, create_block_mask
    if not _flex_compiled:
        _flex_compiled["attend"] = torch.compile(flex_attention)
        _flex_compiled["mask"] = torch.compile(create_block_mask)
    return _flex_compiled["attend"], _flex_compiled["mask"]


def segment_ids(cu_seqlens: torch.Tensor, rows: int) -> torch.Tensor:
    """int32 [rows]: the segment of each packed row (rows past cu_seqlens[-1] get B, a segment of their own)."""
    r = torch.arange(rows, device=cu_seqlens.device, dtype=torch.int32)
    return _segments_ending_by(cu_seqlens, r).to(torch.int32)


def flex_block_mask(cu_seqlens: torch.Tensor, rows: int):
    """FlexAttention's BlockMask of a packed batch (a document mask): row i attends to row j of the same
    segment. Built on the device from `cu_seqlens`, no host sync; `rows` is the packed buffer's row count."""
    _, make_mask = _flex_functions(cu_seqlens.device)
    doc = segment_ids(cu_seqlens, rows)

    def same_segment(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    return make_mask(same_segment, 1, None, rows, rows, device=cu_seqlens.device, BLOCK_SIZE=FLEX_BLOCK)


def flex_attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *,
    scale: float | None = None, block_mask=None,
) -> torch.Tensor:
    """FlexAttention (torch >= 2.5) over the packed rows as one sequence [1, H, T, D] with a document
    mask from `cu_seqlens` (what torch's docs recommend for ragged batches). The mask is built per call
    (`flex_block_mask`) unless `block_mask` is given (its cost then stays out of the call); on CUDA both
    run compiled (see `_flex_compiled`). `max_seqlen` is unused (the mask carries the segments).
    Unlike the other baselines it checks its inputs first (see the comment in the body).
    Rows past cu_seqlens[-1] attend among themselves; their output is meaningless, as for the others."""
    # Checked first (metadata only): FlexAttention would take e.g. an empty cu_seqlens and return garbage;
    # its host cost is the compiled function's dispatch (guards), so the check is in the noise.
    check_inputs(q, k, v, cu_seqlens, host_int_bound(max_seqlen))
    attend, _ = _flex_functions(q.device)  # a torch without FlexAttention: NotImplementedError, unexplained
    try:
        rows = q.shape[0]
        if block_mask is None:
            block_mask = flex_block_mask(cu_seqlens, rows)
        q4, k4, v4 = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))  # [1, H, T, D] views
        return attend(q4, k4, v4, block_mask=block_mask, scale=_scale(q, scale))[0].transpose(0, 1)
    except Exception as exc:
        # FlexAttention raises NotImplementedError ("NYI") for inputs it does not take: explain those too.
        _explain(exc, q, k, v, cu_seqlens, max_seqlen, _NOT_INPUT_ERRORS[1:])
        raise


__all__ = [
    "flex_attention_varlen",
    "flex_block_mask",
    "fa2_varlen_attention",
    "nested_sdpa_attention",
    "padded_sdpa_attention",
    "segment_ids",
    "varlen_attn_attention",
]
