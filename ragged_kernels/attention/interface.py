"""Public entry point: `ragged_attention`, FlashAttention-varlen style, validated, no host sync."""

from __future__ import annotations

import contextlib
import enum
import math
import numbers
import operator
import os
from collections.abc import Iterator
from typing import Final, Literal, Protocol

import torch

from ragged_kernels.attention import native as _native
from ragged_kernels.attention.fwd import SUPPORTED_DTYPES, SUPPORTED_HEAD_DIMS, default_scale, launch_validated
from ragged_kernels.runtime import traceable_op

_SCALES = {d: default_scale(d) for d in SUPPORTED_HEAD_DIMS}
_DEBUG = os.environ.get("RAGGED_KERNELS_DEBUG", "0") not in ("", "0")
# The native entry point (native.py): default where CUDA is available, built (or loaded from torch's
# extension cache) on the first call that can use it, not at import: importing the library costs no
# compiler run (the first build takes ~25 s), and a process that never launches never builds.
class _NativeEntry(Protocol):
    """What the compiled extension offers here (native.cpp)."""

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                  max_seqlen: int, /) -> torch.Tensor: ...


class _Pending(enum.Enum):
    PENDING = enum.auto()


_PENDING: Final = _Pending.PENDING  # not yet built: an enum member, so `is not _PENDING` narrows the type
_NATIVE: _NativeEntry | None | Literal[_Pending.PENDING] = _PENDING if _native.ENABLED else None


def _native_entry() -> _NativeEntry | None:
    """The native entry point, built on first use; None where it is disabled or did not build."""
    global _NATIVE
    if _NATIVE is _PENDING:
        _NATIVE = _native.module()
    return None if _NATIVE is _PENDING else _NATIVE  # module() is never the sentinel


def launch_path() -> str:
    """ "native" or "python": how `ragged_attention` launches its kernel in this process (builds the
    native entry point first where it is enabled, so the answer is the one calls will take)."""
    return "native" if _native_entry() is not None else "python"


@contextlib.contextmanager
def forced_launch_path(path: str) -> Iterator[None]:
    """Context manager: `ragged_attention` launches through `path` ("python" or "native") inside it,
    e.g. to compare the two on one process's kernels. "native" raises RuntimeError where the entry
    point is disabled or did not build."""
    global _NATIVE
    if path not in ("python", "native"):
        raise ValueError(f"path must be 'python' or 'native', got {path!r}")
    entry = _native_entry()
    if path == "native" and entry is None:
        raise RuntimeError("the native entry point is not available (RAGGED_KERNELS_LAUNCH=python, no CUDA, or its "
                           "build failed: see the warning)")
    _NATIVE = entry if path == "native" else None
    try:
        yield
    finally:
        _NATIVE = entry


def set_debug(enabled: bool) -> None:
    """Turn on device-side value checks of `cu_seqlens` (they read it on the host: a sync per call)."""
    global _DEBUG
    _DEBUG = bool(enabled)


def check_cu_seqlens_values(cu_seqlens: torch.Tensor, total_tokens: int, max_seqlen: int) -> None:
    """Debug-mode checks of the values in `cu_seqlens` (syncs with the device)."""
    cu = cu_seqlens.tolist()
    if cu[0] != 0:
        raise ValueError(f"cu_seqlens[0] must be 0, got {cu[0]}")
    lengths = [b - a for a, b in zip(cu[:-1], cu[1:], strict=True)]
    bad = [i for i, n in enumerate(lengths) if n < 0]
    if bad:
        raise ValueError(f"cu_seqlens must be non-decreasing; segment {bad[0]} has length {lengths[bad[0]]}")
    if cu[-1] > total_tokens:
        raise ValueError(f"cu_seqlens[-1] = {cu[-1]} exceeds the {total_tokens} tokens of q/k/v")
    longest = max(lengths, default=0)
    if longest > max_seqlen:
        raise ValueError(f"a segment has {longest} tokens, more than max_seqlen = {max_seqlen}")


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int) -> None:
    """Raise TypeError/ValueError naming what breaks `ragged_attention`'s input contract (metadata only, no
    device sync). The contract's constants are declared once, in `fwd.SUPPORTED_DTYPES` and
    `fwd.SUPPORTED_HEAD_DIMS`; the hot path's combined test and the native entry point's checks
    (native.cpp) are tested against them (tests/ragged_kernels/test_native.py)."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)):
        raise TypeError("q, k and v must be tensors")
    if q.dim() != 3:
        raise ValueError(f"q must be [total_tokens, heads, head_dim], got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must have one shape; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"q/k/v dtype must be float16, bfloat16 or float32, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"q, k, v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[2] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {q.shape[2]}")
    if q.stride(2) != 1 or k.stride(2) != 1 or v.stride(2) != 1:
        raise ValueError("the head_dim axis of q, k and v must be contiguous (stride 1)")
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError("cu_seqlens must be a tensor")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 1:
        raise ValueError(
            f"cu_seqlens must be int32 [B+1], got {cu_seqlens.dtype} of shape {tuple(cu_seqlens.shape)}"
        )
    if not cu_seqlens.is_contiguous():
        raise ValueError("cu_seqlens must be contiguous")
    dev = q.device
    if k.device != dev or v.device != dev or cu_seqlens.device != dev:
        raise ValueError(
            f"q, k, v and cu_seqlens must be on one device; got {dev}, {k.device}, {v.device}, {cu_seqlens.device}"
        )
    if isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int) or max_seqlen < 0:
        raise TypeError(f"max_seqlen must be a non-negative host int (an upper bound), got {max_seqlen!r}")


def _check_out(out) -> None:
    """The detailed check of `out`, run only once the combined test has failed: a TypeError unless it is
    a tensor or None (a tensor that does not match keeps the caller's ValueError)."""
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a tensor [total_tokens, heads, head_dim] of q's dtype and device (or None), "
                        f"got {type(out).__name__}") from None


def as_host_int(value) -> int | None:
    """`value` as a Python int when it is a host integer (NumPy's too), else None (a bool, a float,
    a tensor: reading a device value would sync). The callers raise their own message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return operator.index(value)


def host_int_bound(max_seqlen) -> int:
    """`max_seqlen` as a Python int: any host integer (NumPy's too) is accepted; a tensor is refused
    (reading it would sync with the device, which this API never does), so is a bool or a float."""
    if isinstance(max_seqlen, torch.Tensor):
        raise TypeError("max_seqlen must be a host int (an upper bound of the segment lengths), not a tensor: "
                        "reading a device value would sync; pass the capacity, e.g. the unpruned token count")
    bound = as_host_int(max_seqlen)
    if bound is None:
        raise TypeError(f"max_seqlen must be a non-negative host int (an upper bound), got {max_seqlen!r}")
    return bound


def _check_scale(scale) -> float:
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise TypeError(f"scale must be a finite real number (default 1/sqrt(head_dim)), got {scale!r}")
    return float(scale)


def ragged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    *,
    scale: float | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Non-causal attention within each segment of a packed batch (FlashAttention varlen layout).

    Args:
        q, k, v: `[total_tokens, heads, head_dim]`, float16 / bfloat16 / float32, head_dim 32, 64
            or 128, last axis contiguous. Strided views of one fused qkv buffer are fine, e.g.
            `qkv.view(T, 3, H, D).unbind(1)`; nothing is copied.
        cu_seqlens: int32 `[B+1]` on the same device, `cu_seqlens[b]:cu_seqlens[b+1]` is image b's
            tokens. Rows past `cu_seqlens[-1]` (capacity padding) are not written.
        max_seqlen: host int (NumPy ints too), any upper bound of the segment lengths (e.g. the unpruned 197), so
            callers never read lengths back from the device. The grid depends only on it and B.
            A segment longer than `max_seqlen` breaks that contract: its query rows past the bound
            may be left unwritten (as with FlashAttention); debug mode reports it.
        scale: softmax scale, default `1/sqrt(head_dim)` of the real head_dim.
        out: optional `[total_tokens, heads, head_dim]` output buffer (same dtype/device).

    Returns:
        `[total_tokens, heads, head_dim]`, dtype of q.

    Robustness: whatever `cu_seqlens` holds, the kernel never reads or writes outside q/k/v/out
    (bounds are clamped on the device); with `RAGGED_KERNELS_DEBUG=1` or `set_debug(True)` the
    values are also checked (monotonic, starts at 0, ends within total_tokens, lengths <= max_seqlen).

    Example:
        >>> qkv = torch.randn(T, 3, 12, 64, device="cuda", dtype=torch.float16)
        >>> o = ragged_attention(*qkv.unbind(1), cu_seqlens, max_seqlen=197)
    """
    if type(max_seqlen) is not int:  # from here on max_seqlen is a Python int
        max_seqlen = host_int_bound(max_seqlen)
    if torch.compiler.is_compiling():  # one node of the traced graph (`attention_op`); eager calls skip it
        if out is not None:
            raise ValueError("ragged_attention under torch.compile allocates its output: out= is not supported there")
        return attention_op(q, k, v, cu_seqlens, max_seqlen, None if scale is None else _check_scale(scale))
    # One combined test on the hot path (host cost is a product target); the detailed checks, and
    # their messages, run only when it fails.
    native = _NATIVE if _NATIVE is not _PENDING else _native_entry()
    if native is not None and out is None and scale is None and not _DEBUG:
        try:
            fast = native.attention(q, k, v, cu_seqlens, max_seqlen)
        except TypeError:  # not tensors / not an int: the Python path names the problem
            fast = None
        if fast is not None:
            return fast
    try:
        shape, dtype, dev = q.shape, q.dtype, q.get_device()
        sq, sk, sv = q.stride(), k.stride(), v.stride()  # read once: the launch keys on them too
        cs = cu_seqlens.shape
        ok = (
            len(shape) == 3 and k.shape == shape and v.shape == shape
            and dtype in SUPPORTED_DTYPES and k.dtype is dtype and v.dtype is dtype
            and shape[2] in SUPPORTED_HEAD_DIMS and sq[2] == 1 and sk[2] == 1 and sv[2] == 1
            and cu_seqlens.dtype is torch.int32 and len(cs) == 1 and cs[0] >= 1 and cu_seqlens.is_contiguous()
            and k.get_device() == dev and v.get_device() == dev and cu_seqlens.get_device() == dev
            and ((q.is_cuda and k.is_cuda and v.is_cuda and cu_seqlens.is_cuda)
                 or q.device == k.device == v.device == cu_seqlens.device)
            and max_seqlen >= 0
        )
    except (AttributeError, TypeError):
        ok = False
    if not ok:
        check_inputs(q, k, v, cu_seqlens, max_seqlen)
        raise ValueError("unsupported ragged_attention inputs")  # check_inputs names the problem; a backstop
    if _DEBUG:
        check_cu_seqlens_values(cu_seqlens, shape[0], max_seqlen)
    try:  # costs nothing unless it raises: a non-tensor `out` is named only once the test has failed
        if out is None:
            out = torch.empty_like(q, memory_format=torch.contiguous_format)  # the cheapest allocation call
        elif out.shape != shape or out.dtype is not dtype or out.get_device() != dev or out.stride(2) != 1:
            raise ValueError("out must match q's shape, dtype and device, with a contiguous last axis")
    except (AttributeError, TypeError, ValueError):
        _check_out(out)
        raise
    scale = _SCALES[shape[2]] if scale is None else _check_scale(scale)
    return launch_validated(q, k, v, cu_seqlens, max_seqlen, scale, out, config=None, q_strides=sq, k_strides=sk,
                            v_strides=sv, device_index=dev)


def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                    scale: float | None) -> torch.Tensor:
    check_inputs(q, k, v, cu_seqlens, max_seqlen)  # metadata only: the same errors at trace time
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@traceable_op("ragged_kernels::ragged_attention", _attention_fake)
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                 scale: float | None) -> torch.Tensor:
    """`ragged_attention` as a custom op (`torch.ops.ragged_kernels.ragged_attention`): what a compiled
    graph calls; the same function, validation and launch path."""
    return ragged_attention(q, k, v, cu_seqlens, max_seqlen, scale=scale)
